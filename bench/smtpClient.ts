/**
 * The SMTP benchmarks' load generator, the same for every server it measures (Postern,
 * Postfix): the test suite's raw client (test/support/rawSmtp.ts), a session opened with
 * STARTTLS and AUTH PLAIN, then for each message one pipelined MAIL/RCPT/DATA group followed by
 * the body (RFC 2920, as Postfix's own client sends when the server offers PIPELINING). It
 * leaves the machine's CPU to the server under test, where nodemailer's client spent about as
 * much per message as the server did.
 *
 * The messages are pre-built 2 KB MIME (no Message-ID: the server adds its own), so the
 * generator's CPU goes to the protocol, not to composing MIME; it still shares the machine's
 * cores with the server.
 */
import { authedSession, dataPayload, type RawSmtp, tlsSession } from '../test/support/rawSmtp.js';

export const SMTP_SESSIONS = Number(process.env.BENCH_SMTP_SESSIONS ?? 20);
export const SMTP_MESSAGES_PER_SESSION = Number(process.env.BENCH_SMTP_MESSAGES_PER_SESSION ?? 100);
export const MESSAGE_BYTES = 2048;

/** AUTH PLAIN's user and password; null: the server offers no AUTH, the session only does STARTTLS. */
export type SmtpCredentials = { user: string; password: string } | null;

/** Connects, upgrades with STARTTLS and authenticates (unless `credentials` is null). */
export function openBenchSession(
  host: string,
  port: number,
  credentials: SmtpCredentials,
): Promise<RawSmtp> {
  return credentials
    ? authedSession(port, credentials.password, false, host, credentials.user)
    : tlsSession(port, false, host);
}

/** Sends one message; resolves with the reply to its final dot (or the first refusal). */
export async function sendPipelined(
  client: RawSmtp,
  from: string,
  to: string,
  raw: string,
): Promise<string> {
  client.write(`MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
  const [mail, rcpt, data] = [await client.next(), await client.next(), await client.next()];
  if (!data.startsWith('354'))
    return !mail.startsWith('250') ? mail : !rcpt.startsWith('250') ? rcpt : data;
  client.write(dataPayload(raw));
  return client.next();
}

const FILLER = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ';

/** One pre-built message of exactly `MESSAGE_BYTES`, its subject made unique by `tag`. */
export function buildMessage(tag: string): string {
  const head = `From: Bench <bench@example.com>\r\nTo: rcpt@example.org\r\nSubject: SMTP benchmark ${tag}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n`;
  const room = MESSAGE_BYTES - head.length - 2;
  const lines: string[] = [];
  let used = 0;
  while (used < room) {
    const line = FILLER.slice(0, Math.min(72, room - used - 2));
    lines.push(line);
    used += line.length + 2;
  }
  return `${`${head}${lines.join('\r\n')}\r\n`.slice(0, MESSAGE_BYTES - 2)}\r\n`;
}

/** The server a load runs against. */
export interface SmtpTarget {
  host: string;
  port: number;
  credentials: SmtpCredentials;
  /** The reply to the final dot that means the message was accepted (durably). */
  accepted: RegExp;
  /** CPU seconds the server has used so far (its processes'), read at the window's two ends. */
  serverCpuSeconds(): number;
}

/** A phase's probe of the server (bench/serverCost.ts) as a load drives it: armed a second before the window, opened with it; the caller closes it. */
export interface WindowHooks {
  arm(): Promise<void>;
  open(): Promise<void>;
}

/** How long before the window a probe is armed: after the warm-up has started the server's threads, in time for its counters to attach. */
export const ARM_LEAD_MS = 1000;

export interface SmtpLoadResult {
  sessions: number;
  messages_per_session: number;
  message_bytes: number;
  /** The measured window's nominal length (messages started in it and answered after it count). */
  seconds: number;
  /** The window as it ran: from the warm-up's end to the last reply. */
  window_seconds: number;
  /** Messages answered with `target.accepted` in the measured window. */
  accepted: number;
  /** Refusals and connection failures in the measured window. */
  errors: number;
  /** Sessions opened (TLS handshake + AUTH) during the whole run, warm-up included. */
  sessions_opened: number;
  latenciesMs: number[];
  /** CPU seconds per wall-clock second during the measured window (2.0 = two cores busy). */
  server_cpu: number;
  generator_cpu: number;
  /** Every acceptance of the run, warm-up included: what the server must have stored. */
  acknowledged_total: number;
  error_samples: string[];
}

/**
 * `SMTP_SESSIONS` sessions, each sending messages one after another (a new session every
 * `SMTP_MESSAGES_PER_SESSION`), for `warmupMs` and then the measured `durationMs`.
 * `onWindowStart` runs when the warm-up ends, with the acceptances so far (a caller's own
 * snapshot, e.g. the sink's count).
 */
export async function runSmtpLoad(
  target: SmtpTarget,
  durationMs: number,
  warmupMs: number,
  onWindowStart?: (acknowledged: number) => void,
  hooks?: WindowHooks,
): Promise<SmtpLoadResult> {
  const clients = new Set<RawSmtp>();
  const result: SmtpLoadResult = {
    sessions: SMTP_SESSIONS,
    messages_per_session: SMTP_MESSAGES_PER_SESSION,
    message_bytes: MESSAGE_BYTES,
    seconds: durationMs / 1000,
    window_seconds: NaN,
    accepted: 0,
    errors: 0,
    sessions_opened: 0,
    latenciesMs: [],
    server_cpu: NaN,
    generator_cpu: NaN,
    acknowledged_total: 0,
    error_samples: [],
  };
  const started = performance.now();
  const measureFrom = started + warmupMs;
  const stopAt = measureFrom + durationMs;
  const generatorCpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  };
  let cpuAtStart: { server: number; generator: number } | null = null;
  let armed: Promise<void> = Promise.resolve();
  let opened: Promise<void> = Promise.resolve();
  const armTimer = setTimeout(
    () => (armed = hooks?.arm() ?? armed),
    Math.max(0, warmupMs - ARM_LEAD_MS),
  );
  const windowTimer = setTimeout(() => {
    cpuAtStart = { server: target.serverCpuSeconds(), generator: generatorCpu() };
    opened = hooks?.open() ?? opened;
    onWindowStart?.(result.acknowledged_total);
  }, warmupMs);
  try {
    await Promise.all(
      Array.from({ length: SMTP_SESSIONS }, async (_, n) => {
        let client: RawSmtp | null = null;
        for (let i = 0; ; i++) {
          const t0 = performance.now();
          if (t0 >= stopAt) break;
          const raw = buildMessage(`${n}.${i}`);
          let ok = false;
          let failure = '';
          try {
            // A new session (STARTTLS + AUTH) every `SMTP_MESSAGES_PER_SESSION` messages.
            if (i % SMTP_MESSAGES_PER_SESSION === 0) {
              void client?.quit();
              client = await openBenchSession(target.host, target.port, target.credentials);
              clients.add(client);
              result.sessions_opened++;
            }
            const reply = await sendPipelined(
              client!,
              'bench@example.com',
              'rcpt@example.org',
              raw,
            );
            ok = target.accepted.test(reply);
            if (!ok) failure = reply;
          } catch (err) {
            failure = (err as Error).message;
          }
          const t1 = performance.now();
          if (ok) result.acknowledged_total++;
          if (t0 < measureFrom) continue;
          result.latenciesMs.push(t1 - t0);
          if (ok) result.accepted++;
          else {
            result.errors++;
            if (result.error_samples.length < 5) result.error_samples.push(failure);
          }
        }
        void client?.quit();
      }),
    );
    const wall = (performance.now() - measureFrom) / 1000;
    result.window_seconds = +wall.toFixed(2);
    if (cpuAtStart !== null) {
      const start = cpuAtStart as { server: number; generator: number };
      result.server_cpu = +((target.serverCpuSeconds() - start.server) / wall).toFixed(2);
      result.generator_cpu = +((generatorCpu() - start.generator) / wall).toFixed(2);
    }
    result.latenciesMs.sort((a, b) => a - b);
    await armed;
    await opened;
    return result;
  } finally {
    clearTimeout(armTimer);
    clearTimeout(windowTimer);
    for (const c of clients) c.destroy();
  }
}
