/**
 * A lean SMTP client for load generation: STARTTLS, AUTH PLAIN, then for each message one
 * pipelined MAIL/RCPT/DATA group followed by the body (RFC 2920, as Postfix's own client sends
 * when the server offers PIPELINING). It leaves the machine's CPU to the server under test,
 * where nodemailer's client spent about as much per message as the server did.
 */
import net from 'node:net';
import tls from 'node:tls';

interface Reply {
  code: number;
  text: string;
}

export class PipeliningSmtpClient {
  private socket: net.Socket;
  private buffer = '';
  private lines: string[] = [];
  private readonly replies: Reply[] = [];
  private readonly waiting: ((r: Reply) => void)[] = [];

  private constructor(socket: net.Socket) {
    this.socket = socket;
    this.listen();
  }

  /** Connects, upgrades with STARTTLS and authenticates with `password` (the API key). */
  static async open(host: string, port: number, password: string): Promise<PipeliningSmtpClient> {
    const plain = net.connect({ host, port });
    await new Promise<void>((resolve, reject) => plain.once('connect', resolve).once('error', reject));
    const client = new PipeliningSmtpClient(plain);
    await client.expect(220);
    await client.command('EHLO bench.example', 250);
    await client.command('STARTTLS', 220);
    plain.removeAllListeners('data');
    const secure = tls.connect({ socket: plain, rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
    client.socket = secure;
    client.listen();
    await client.command('EHLO bench.example', 250);
    await client.command(`AUTH PLAIN ${Buffer.from(`\0bench\0${password}`).toString('base64')}`, 235);
    return client;
  }

  /** Sends one message; resolves with the reply to its final dot (or the first refusal). */
  async send(from: string, to: string, raw: string): Promise<Reply> {
    this.socket.write(`MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
    const [mail, rcpt, data] = [await this.next(), await this.next(), await this.next()];
    if (data.code !== 354) return mail.code !== 250 ? mail : rcpt.code !== 250 ? rcpt : data;
    const body = raw.replace(/^\./gm, '..');
    this.socket.write(`${body}${body.endsWith('\r\n') ? '' : '\r\n'}.\r\n`);
    return this.next();
  }

  close(): void {
    this.socket.end('QUIT\r\n');
    this.socket.destroy();
  }

  private listen(): void {
    this.socket.setEncoding('latin1');
    this.socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      for (let end = this.buffer.indexOf('\r\n'); end !== -1; end = this.buffer.indexOf('\r\n')) {
        const line = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        this.lines.push(line);
        if (line[3] === '-') continue; // a multi-line reply goes on
        const reply = { code: Number(line.slice(0, 3)), text: this.lines.join('\n') };
        this.lines = [];
        const waiter = this.waiting.shift();
        if (waiter) waiter(reply);
        else this.replies.push(reply);
      }
    });
    this.socket.on('error', () => this.failAll());
    this.socket.on('close', () => this.failAll());
  }

  private failAll(): void {
    for (const waiter of this.waiting.splice(0)) waiter({ code: 0, text: 'connection closed' });
  }

  private next(): Promise<Reply> {
    const ready = this.replies.shift();
    if (ready) return Promise.resolve(ready);
    if (this.socket.destroyed) return Promise.resolve({ code: 0, text: 'connection closed' });
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private async expect(code: number): Promise<void> {
    const reply = await this.next();
    if (reply.code !== code) throw new Error(`expected ${code}, got ${reply.text}`);
  }

  private async command(line: string, code: number): Promise<void> {
    this.socket.write(`${line}\r\n`);
    await this.expect(code);
  }
}
