/**
 * A live-updates stream (`GET /console/api/v1/events/stream`) read over a raw socket, as a client
 * that is not a browser would: the request written by hand, the status line and headers parsed,
 * the chunked body decoded and its server-sent events collected. It can stop reading (`pause`:
 * the socket is no longer read from, so the server's writes pile up in the kernel and then in
 * the server) and read again (`resume`). Plain TCP for http:, TLS for https: (with `ca`).
 */
import net from 'node:net';
import tls from 'node:tls';
import { API } from './console.js';
import { waitFor } from './waiting.js';

export interface StreamEvent {
  event: string;
  data: any;
}

export interface RawStreamOptions {
  /** `postern_session=…`, as a console client holds it. */
  cookie?: string | null;
  /** A `pso_` operator token (sent as Bearer). */
  token?: string | null;
  /** `?project=…&environment=…`. */
  query?: string;
  /** The console's certificate (https: bases). */
  ca?: string;
  /** Stop reading once the response head has arrived: a client that never reads its stream. */
  paused?: boolean;
  /** Which events to keep (all by default); the others are only counted. */
  keep?: (e: StreamEvent) => boolean;
}

export class RawEventStream {
  status = 0;
  headers: Record<string, string> = {};
  /** A refusal's JSON body (a stream that did not open). */
  body: any = null;
  readonly events: StreamEvent[] = [];
  /** Events received, kept or not. */
  received = 0;
  /** Set once the server has closed the connection (FIN or reset) and everything before it was read. */
  ended = false;
  private readonly socket: net.Socket;
  private raw = Buffer.alloc(0);
  private headDone = false;
  private chunked = false;
  private text = '';
  private readonly opened: Promise<void>;
  private readonly options: RawStreamOptions;

  private constructor(base: string, options: RawStreamOptions) {
    this.options = options;
    const url = new URL(base);
    const port = Number(url.port);
    const host = url.hostname;
    this.socket =
      url.protocol === 'https:'
        ? tls.connect({ host, port, ca: options.ca, servername: net.isIP(host) ? undefined : host })
        : net.connect({ host, port });
    const lines = [
      `GET ${API}/events/stream${options.query ?? ''} HTTP/1.1`,
      `Host: ${url.host}`,
      'Accept: text/event-stream',
    ];
    if (options.cookie) lines.push(`Cookie: ${options.cookie}`);
    if (options.token) lines.push(`Authorization: Bearer ${options.token}`);
    this.socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    this.opened = new Promise<void>((resolve, reject) => {
      let opened = false;
      this.socket.on('data', (data: Buffer) => {
        this.raw = Buffer.concat([this.raw, data]);
        this.parse();
        if (this.headDone && !opened) {
          opened = true;
          if (this.options.paused && this.status === 200) this.socket.pause();
          resolve();
        }
      });
      const finish = () => {
        this.ended = true;
        if (!this.headDone)
          reject(
            new Error(`the connection closed before a response head (${this.raw.length} bytes)`),
          );
      };
      this.socket.on('end', finish);
      this.socket.on('close', finish);
      this.socket.on('error', () => {
        // A reset: 'close' follows.
      });
    });
  }

  /** Opens a stream; resolves once the response head has arrived (for a refusal: its whole body too). */
  static async open(base: string, options: RawStreamOptions = {}): Promise<RawEventStream> {
    const stream = new RawEventStream(base, options);
    await stream.opened;
    if (stream.status !== 200)
      await waitFor(() => stream.body !== null || stream.ended, 10_000, 'the refusal body');
    return stream;
  }

  /** Stops reading from the socket (the server's writes then wait in the kernel, then in the server). */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  /** Closes the connection from this side. */
  close(): void {
    this.socket.destroy();
  }

  /** The first kept event that `match` accepts, waiting for it. */
  next(
    match: (e: StreamEvent) => boolean,
    timeoutMs = 10_000,
    what = 'a matching event',
  ): Promise<StreamEvent> {
    return waitFor(
      () => this.events.find(match),
      timeoutMs,
      `${what}; got ${JSON.stringify(this.events.slice(-5))}`,
    );
  }

  /** Resolves once the server has closed the stream (and everything it sent before was read). */
  async closedByServer(timeoutMs = 10_000): Promise<void> {
    await waitFor(() => this.ended, timeoutMs, 'the server to close the stream');
  }

  private parse(): void {
    if (!this.headDone) {
      const end = this.raw.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.raw.subarray(0, end).toString('latin1').split('\r\n');
      this.status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head[0])?.[1] ?? 0);
      for (const line of head.slice(1)) {
        const colon = line.indexOf(':');
        this.headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      this.chunked = /chunked/i.test(this.headers['transfer-encoding'] ?? '');
      this.raw = this.raw.subarray(end + 4);
      this.headDone = true;
    }
    if (this.status !== 200) {
      const length = Number(this.headers['content-length'] ?? -1);
      if (length >= 0 && this.raw.length >= length)
        this.body = JSON.parse(this.raw.subarray(0, length).toString('utf8'));
      return;
    }
    if (!this.chunked) {
      this.text += this.raw.toString('utf8');
      this.raw = Buffer.alloc(0);
    } else {
      for (;;) {
        const lineEnd = this.raw.indexOf('\r\n');
        if (lineEnd < 0) break;
        const size = parseInt(this.raw.subarray(0, lineEnd).toString('latin1'), 16);
        if (size === 0) {
          this.raw = Buffer.alloc(0);
          break;
        }
        if (this.raw.length < lineEnd + 2 + size + 2) break;
        this.text += this.raw.subarray(lineEnd + 2, lineEnd + 2 + size).toString('utf8');
        this.raw = this.raw.subarray(lineEnd + 2 + size + 2);
      }
    }
    for (
      let blockEnd = this.text.indexOf('\n\n');
      blockEnd >= 0;
      blockEnd = this.text.indexOf('\n\n')
    ) {
      const block = this.text.slice(0, blockEnd);
      this.text = this.text.slice(blockEnd + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event === undefined || data === undefined) continue;
      const parsed = { event, data: JSON.parse(data) as unknown };
      this.received++;
      if (!this.options.keep || this.options.keep(parsed)) this.events.push(parsed);
    }
  }
}
