/**
 * SMTP ingest benchmark: 2 KB messages over STARTTLS + AUTH from `SESSIONS` concurrent
 * sessions against a real Postern process, each session sending up to `MESSAGES_PER_SESSION`
 * messages before it reconnects (and pays for STARTTLS and AUTH again).
 *
 * The load generator is bench/smtpClient.ts: one connection per session, MAIL/RCPT/DATA
 * pipelined as Postfix's client sends them. The messages are pre-built 2 KB MIME (no
 * Message-ID: the server adds its own), so the generator's CPU goes to the protocol, not to
 * composing MIME; it still shares the machine's cores with the server. Postfix's
 * `smtp-source` cannot be used: it speaks neither STARTTLS nor AUTH, and Postern refuses MAIL
 * FROM without both.
 */
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { runCli, tempStateDir } from '../test/support/postern.js';
import type { RawSmtp } from '../test/support/rawSmtp.js';
import { openBenchSession, sendPipelined } from './smtpClient.js';
import { BENCH_RATE_LIMITS, cpuSeconds, peakRssMb, startBenchPostern, removeAfterBench } from './benchServer.js';

export const SMTP_SESSIONS = Number(process.env.BENCH_SMTP_SESSIONS ?? 20);
export const SMTP_MESSAGES_PER_SESSION = Number(process.env.BENCH_SMTP_MESSAGES_PER_SESSION ?? 100);
const MESSAGE_BYTES = 2048;

export interface SmtpIngestResult {
  sessions: number;
  messages_per_session: number;
  message_bytes: number;
  seconds: number;
  /** Messages answered `250 2.0.0 OK queued as m.…` in the measured window. */
  accepted: number;
  /** Refusals and connection failures in the measured window. */
  errors: number;
  /** Sessions opened (TLS handshake + AUTH) during the whole run, warm-up included. */
  sessions_opened: number;
  latenciesMs: number[];
  server_peak_rss_mb: number;
  /** CPU seconds per wall-clock second during the measured window (2.0 = two cores busy). */
  server_cpu: number;
  generator_cpu: number;
  /** Every 250 of the run, warm-up included; `rows_stored` is at least this. */
  acknowledged_total: number;
  rows_stored: number;
  error_samples: string[];
}

/** One pre-built message of exactly `MESSAGE_BYTES`, its subject made unique by `tag`. */
function buildMessage(tag: string, filler: string): string {
  const head =
    'From: Bench <bench@example.com>\r\nTo: rcpt@example.org\r\n' +
    `Subject: SMTP benchmark ${tag}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n`;
  const room = MESSAGE_BYTES - head.length - 2;
  const lines: string[] = [];
  let used = 0;
  while (used < room) {
    const line = filler.slice(0, Math.min(72, room - used - 2));
    lines.push(line);
    used += line.length + 2;
  }
  return `${head}${lines.join('\r\n')}\r\n`.slice(0, MESSAGE_BYTES - 2) + '\r\n';
}

export async function smtpIngestPhase(durationMs: number, warmupMs: number): Promise<SmtpIngestResult> {
  const stateDir = tempStateDir('postern-bench-smtp-');
  const configFile = `${stateDir}/bench.json`;
  // Rate limits stay on but far above the offered load; nothing is relayed (ingest is measured,
  // and the provider below is a placeholder).
  writeFileSync(configFile, JSON.stringify({ rate_limits: BENCH_RATE_LIMITS, delivery: { enabled: false } }));
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configFile };
  const project = (await runCli(['project', 'create', '--name', 'bench-smtp', '--plan', 'pro', '--json'], env)).json as { id: string };
  await runCli(['provider', 'attach', '--project', project.id, '--slug', 'smtp', '--host', '127.0.0.1', '--port', '9', '--tls', 'none', '--json'], env);
  const key = (await runCli(['key', 'create', '--project', project.id, '--mode', 'live', '--json'], env)).json as { key: string };
  const server = await startBenchPostern(stateDir, configFile);
  const pid = server.child.pid!;
  const clients = new Set<RawSmtp>();
  try {
    const listener = server.listeners.find((l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'));
    if (!listener) throw new Error('no production STARTTLS listener');
    let sessionsOpened = 0;
    const filler = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ';
    const result: SmtpIngestResult = {
      sessions: SMTP_SESSIONS,
      messages_per_session: SMTP_MESSAGES_PER_SESSION,
      message_bytes: MESSAGE_BYTES,
      seconds: durationMs / 1000,
      accepted: 0,
      errors: 0,
      sessions_opened: 0,
      latenciesMs: [],
      server_peak_rss_mb: NaN,
      server_cpu: NaN,
      generator_cpu: NaN,
      acknowledged_total: 0,
      rows_stored: 0,
      error_samples: [],
    };
    const started = performance.now();
    const measureFrom = started + warmupMs;
    const stopAt = measureFrom + durationMs;
    let cpuAtStart: { server: number; generator: number } | null = null;
    const cpuTimer = setTimeout(() => {
      const u = process.cpuUsage();
      cpuAtStart = { server: cpuSeconds(pid), generator: (u.user + u.system) / 1e6 };
    }, warmupMs);
    let acceptedTotal = 0;
    await Promise.all(
      Array.from({ length: SMTP_SESSIONS }, async (_, n) => {
        let client: RawSmtp | null = null;
        for (let i = 0; ; i++) {
          const t0 = performance.now();
          if (t0 >= stopAt) break;
          const raw = buildMessage(`${n}.${i}`, filler);
          let ok = false;
          let failure = '';
          try {
            // A new session (STARTTLS + AUTH) every `SMTP_MESSAGES_PER_SESSION` messages.
            if (i % SMTP_MESSAGES_PER_SESSION === 0) {
              void client?.quit();
              client = await openBenchSession(listener.host, listener.port, key.key);
              clients.add(client);
              sessionsOpened++;
            }
            const reply = await sendPipelined(client!, 'bench@example.com', 'rcpt@example.org', raw);
            ok = /^250 2\.0\.0 OK queued as m\.[0-9a-z]{26}$/.test(reply);
            if (!ok) failure = reply;
          } catch (err) {
            failure = (err as Error).message;
          }
          const t1 = performance.now();
          if (ok) acceptedTotal++;
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
    clearTimeout(cpuTimer);
    const wall = (performance.now() - measureFrom) / 1000;
    if (cpuAtStart !== null) {
      const start = cpuAtStart as { server: number; generator: number };
      const u = process.cpuUsage();
      result.server_cpu = +((cpuSeconds(pid) - start.server) / wall).toFixed(2);
      result.generator_cpu = +(((u.user + u.system) / 1e6 - start.generator) / wall).toFixed(2);
    }
    result.sessions_opened = sessionsOpened;
    result.acknowledged_total = acceptedTotal;
    result.server_peak_rss_mb = +peakRssMb(pid).toFixed(1);
    for (const c of clients) c.destroy();
    await server.stop();
    const db = new Database(`${stateDir}/postern.db`, { readonly: true });
    result.rows_stored = db.prepare("SELECT COUNT(*) FROM messages WHERE source = 'smtp'").pluck().get() as number;
    db.close();
    if (result.rows_stored < acceptedTotal) throw new Error(`only ${result.rows_stored} rows for ${acceptedTotal} acknowledged SMTP messages`);
    result.latenciesMs.sort((a, b) => a - b);
    return result;
  } finally {
    for (const c of clients) c.destroy();
    if (server.child.exitCode === null && server.child.signalCode === null) await server.kill();
    removeAfterBench(stateDir);
  }
}
