/** A next-hop SMTP relay on 127.0.0.1 (the "provider account" of delivery, crash, cluster and console tests). */
import type net from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface SmtpReply {
  code: number;
  text: string;
}

function smtpError(reply: SmtpReply): Error {
  return Object.assign(new Error(reply.text), { responseCode: reply.code });
}

export interface Received {
  from: string;
  to: string[];
  raw: Buffer;
  queueId: string;
}

export interface SinkBehaviour {
  /** A reply for MAIL FROM other than 250 (null: accept). */
  mail?: (from: string) => SmtpReply | null;
  /** Delay before answering MAIL FROM (a slow relay). */
  mailDelayMs?: number;
  /** MAIL FROM is answered only once this settles (a relay that stalls until the test lets it go). */
  mailUntil?: Promise<unknown>;
  rcpt?: (to: string) => SmtpReply | null;
  /** A reply for the end of DATA other than 250, given how many DATA were received before. */
  data?: (previous: number) => SmtpReply | null;
  /** Delay before answering the end of DATA (a relay a little slower than instant: a kill finds hand-offs in flight). */
  dataDelayMs?: number;
  /**
   * The end of DATA is answered only once this settles (the message is recorded at once): the
   * hand-offs it holds are in flight, taken by the relay but not yet known to the sender.
   */
  dataHold?: Promise<void>;
  /** Called with how many messages it holds, after each accepted message is recorded and before it is answered. */
  onReceived?: (count: number) => void;
  /** AUTH required, and every credential refused with 535. */
  refuseAuth?: boolean;
  /** AUTH required, and only this user and password accepted. */
  credentials?: { user: string; pass: string };
  /** STARTTLS offered with this certificate (else it is not offered). */
  tls?: { key: string; cert: string };
}

/** A next-hop SMTP relay on 127.0.0.1: records what it accepts, refuses what it is told to. */
export class Sink {
  readonly received: Received[] = [];
  dataCount = 0;
  mailCount = 0;
  /** Messages received whose end of DATA waits for `dataHold`. */
  held = 0;
  /** SMTP connections opened to this relay. */
  connections = 0;
  private constructor(
    readonly name: string,
    private readonly server: SMTPServer,
    readonly port: number,
    public behaviour: SinkBehaviour,
  ) {}

  static async start(name: string, behaviour: SinkBehaviour = {}): Promise<Sink> {
    let sink: Sink | null = null;
    const server = new SMTPServer({
      logger: false,
      closeTimeout: 500,
      disabledCommands: behaviour.tls ? [] : ['STARTTLS'],
      ...(behaviour.tls ?? {}),
      authOptional: !behaviour.refuseAuth && !behaviour.credentials,
      allowInsecureAuth: true,
      onConnect(_session, callback) {
        sink!.connections++;
        callback();
      },
      onAuth(auth, _session, callback) {
        const c = behaviour.credentials;
        if (c && auth.username === c.user && auth.password === c.pass)
          return callback(null, { user: auth.username });
        callback(smtpError({ code: 535, text: '5.7.8 Authentication credentials invalid' }));
      },
      onMailFrom(address, _session, callback) {
        const self = sink!;
        self.mailCount++;
        const reply = self.behaviour.mail?.(address.address) ?? null;
        const answer = () => callback(reply ? smtpError(reply) : null);
        if (self.behaviour.mailUntil) void self.behaviour.mailUntil.then(answer, answer);
        else if (self.behaviour.mailDelayMs) setTimeout(answer, self.behaviour.mailDelayMs);
        else answer();
      },
      onRcptTo(address, _session, callback) {
        const reply = sink!.behaviour.rcpt?.(address.address) ?? null;
        callback(reply ? smtpError(reply) : null);
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const self = sink!;
          const reply = self.behaviour.data?.(self.dataCount) ?? null;
          self.dataCount++;
          if (reply) return callback(smtpError(reply));
          const queueId = `${self.name}-${String(self.received.length + 1).padStart(4, '0')}`;
          self.received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            raw: Buffer.concat(chunks),
            queueId,
          });
          self.behaviour.onReceived?.(self.received.length);
          const answer = () => callback(null, `OK queued as ${queueId}`);
          const hold = self.behaviour.dataHold;
          if (hold) {
            self.held++;
            void hold.then(() => {
              self.held--;
              answer();
            });
          } else if (self.behaviour.dataDelayMs) setTimeout(answer, self.behaviour.dataDelayMs);
          else answer();
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    server.on('error', () => undefined);
    const port = ((server as unknown as { server: net.Server }).server.address() as net.AddressInfo)
      .port;
    sink = new Sink(name, server, port, behaviour);
    return sink;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The first `name:` header of a raw message's header block, unfolded; null when it has none. */
export function headerOf(raw: Buffer, name: string): string | null {
  const text = raw.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  const head = (end < 0 ? text : text.slice(0, end)).replace(/\r\n[ \t]+/g, ' ');
  const m = new RegExp(`^${name}:[ \\t]*(.*)$`, 'im').exec(head);
  return m ? m[1].trimEnd() : null;
}
