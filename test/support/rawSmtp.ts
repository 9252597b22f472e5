/**
 * A raw SMTP client (node:net / node:tls) for what a library client would not let us do: the
 * SMTP tests drive it command by command, the SMTP benchmark pipelines through it.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';

export class RawSmtp {
  private buffer = '';
  private lines: string[] = [];
  private readonly replies: string[] = [];
  private readonly waiters: { resolve: (reply: string) => void; reject: (err: Error) => void }[] =
    [];
  private ended = false;
  /** Resolves when the TCP connection is gone. */
  readonly closed: Promise<void>;

  private constructor(private socket: net.Socket) {
    socket.on('data', this.onData);
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      socket.once('close', () => {
        this.ended = true;
        for (const w of this.waiters.splice(0)) w.reject(new Error('connection closed'));
        resolve();
      }),
    );
  }

  /**
   * Connects and reads the greeting. `implicit`: TLS from the first byte. `localAddress`: the
   * address to connect from (127.0.0.2, … on loopback); `proxyHeader`: written first, before TLS
   * too, as a load balancer sends its PROXY protocol line.
   */
  static async connect(
    port: number,
    opts: { host?: string; implicit?: boolean; localAddress?: string; proxyHeader?: string } = {},
  ): Promise<{ client: RawSmtp; greeting: string }> {
    const host = opts.host ?? '127.0.0.1';
    const tcp = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect({ host, port, localAddress: opts.localAddress }, () => resolve(s));
      s.once('error', reject);
    });
    if (opts.proxyHeader !== undefined) tcp.write(opts.proxyHeader);
    const socket = !opts.implicit
      ? tcp
      : await new Promise<net.Socket>((resolve, reject) => {
          const s: net.Socket = tls.connect({ socket: tcp, rejectUnauthorized: false }, () =>
            resolve(s),
          );
          s.once('error', reject);
        });
    const client = new RawSmtp(socket);
    return { client, greeting: await client.next() };
  }

  private onData = (chunk: Buffer) => {
    this.buffer += chunk.toString('utf8');
    for (let i = this.buffer.indexOf('\r\n'); i >= 0; i = this.buffer.indexOf('\r\n')) {
      const line = this.buffer.slice(0, i);
      this.buffer = this.buffer.slice(i + 2);
      this.lines.push(line);
      if (/^\d{3}-/.test(line)) continue;
      const reply = this.lines.join('\n');
      this.lines = [];
      const waiter = this.waiters.shift();
      if (waiter) waiter.resolve(reply);
      else this.replies.push(reply);
    }
  };

  /** The next complete (possibly multi-line, joined with \n) reply. */
  next(): Promise<string> {
    const queued = this.replies.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.ended) return Promise.reject(new Error('connection closed'));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Writes and resolves once the socket has taken it (a big payload without buffering it all). */
  async writeAll(data: string | Buffer): Promise<void> {
    if (!this.socket.write(data)) await Promise.race([once(this.socket, 'drain'), this.closed]);
  }

  command(line: string): Promise<string> {
    this.write(`${line}\r\n`);
    return this.next();
  }

  /** STARTTLS, then the TLS handshake over the same connection. */
  async startTls(): Promise<void> {
    const reply = await this.command('STARTTLS');
    assert.match(reply, /^220 /);
    this.socket.off('data', this.onData);
    const secure = tls.connect({ socket: this.socket, rejectUnauthorized: false });
    secure.on('error', () => undefined);
    await once(secure, 'secureConnect');
    secure.on('data', this.onData);
    this.socket = secure;
  }

  fingerprint(): string {
    return (this.socket as tls.TLSSocket).getPeerCertificate().fingerprint256;
  }

  /** QUIT (if still open) and wait for the connection to end. */
  async quit(): Promise<void> {
    if (!this.ended) {
      this.write('QUIT\r\n');
      const timer = setTimeout(() => this.socket.destroy(), 2000);
      await this.closed;
      clearTimeout(timer);
    }
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** AUTH PLAIN's argument for an API key (or any password) as the password of `user`. */
export const plain = (key: string, user = 'user') =>
  Buffer.from(`\0${user}\0${key}`).toString('base64');

/** EHLO, STARTTLS (unless implicit), EHLO: an encrypted session, not yet authenticated. */
export async function tlsSession(
  port: number,
  implicit = false,
  host = '127.0.0.1',
): Promise<RawSmtp> {
  const { client, greeting } = await RawSmtp.connect(port, { host, implicit });
  assert.match(greeting, /^220 /);
  assert.match(await client.command('EHLO client.test'), /^250/);
  if (!implicit) {
    await client.startTls();
    assert.match(await client.command('EHLO client.test'), /^250/);
  }
  return client;
}

/** A TLS session (tlsSession), then AUTH PLAIN with the key as `user`'s password: a session ready for MAIL. */
export async function authedSession(
  port: number,
  key: string,
  implicit = false,
  host = '127.0.0.1',
  user = 'user',
): Promise<RawSmtp> {
  const client = await tlsSession(port, implicit, host);
  assert.match(await client.command(`AUTH PLAIN ${plain(key, user)}`), /^235 /);
  return client;
}

/** Dot-stuffs and terminates a message for DATA. */
export function dataPayload(message: string): string {
  const body = message.replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..');
  return `${body}${body.endsWith('\r\n') ? '' : '\r\n'}.\r\n`;
}

/** One message over an open session: MAIL, RCPT each, DATA; the final reply. */
export async function rawSend(
  client: RawSmtp,
  from: string,
  rcpts: string[],
  message: string,
): Promise<string> {
  const mail = await client.command(`MAIL FROM:<${from}>`);
  if (!mail.startsWith('250')) return mail;
  for (const r of rcpts) assert.match(await client.command(`RCPT TO:<${r}>`), /^250 /);
  assert.match(await client.command('DATA'), /^354 /);
  client.write(dataPayload(message));
  return client.next();
}

/** A small text/plain message as raw MIME (CRLF line ends). */
export function rawMessage(
  opts: {
    from?: string;
    to?: string;
    subject?: string | null;
    headers?: string[];
    body?: string;
  } = {},
): string {
  const lines = [
    `From: ${opts.from ?? 'sender@example.com'}`,
    `To: ${opts.to ?? 'rcpt@example.org'}`,
  ];
  if (opts.subject !== null) lines.push(`Subject: ${opts.subject ?? 'Raw hello'}`);
  lines.push(
    ...(opts.headers ?? []),
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    opts.body ?? 'Raw body',
  );
  return `${lines.join('\r\n')}\r\n`;
}
