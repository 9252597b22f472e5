/**
 * A TCP forwarder on 127.0.0.1 in front of a server, to take that server out of a client's
 * reach and bring it back: `shut` stops listening (new connections are refused) and cuts the
 * open ones, as a server that stopped would; `open` listens again on the same port. The server
 * behind it keeps running (a browser test's shared server).
 */
import net from 'node:net';

export class TcpGate {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly target: { host: string; port: number },
    private port: number,
  ) {}

  /** A gate to `targetUrl` (http://host:port), open. */
  static async start(targetUrl: string): Promise<TcpGate> {
    const u = new URL(targetUrl);
    const gate = new TcpGate({ host: u.hostname, port: Number(u.port) }, 0);
    await gate.open();
    return gate;
  }

  /** The gate's address, as `targetUrl` was given (http://127.0.0.1:port). */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async open(): Promise<void> {
    if (this.server) return;
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  /** Refuses new connections and cuts the open ones. */
  async shut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  close(): Promise<void> {
    return this.shut();
  }
}
