/**
 * SMTP ingest benchmark: 2 KB messages over STARTTLS + AUTH from `SMTP_SESSIONS` concurrent
 * sessions against a real Postern process, each session sending up to
 * `SMTP_MESSAGES_PER_SESSION` messages before it reconnects (and pays for STARTTLS and AUTH
 * again). Delivery is off: what is measured is acceptance, each 250 following the flush of the
 * spool file and its index row.
 *
 * The load generator is bench/smtpClient.ts (the one bench/postfix.ts drives Postfix with).
 * Postfix's `smtp-source` cannot be used: it speaks neither STARTTLS nor AUTH, and Postern
 * refuses MAIL FROM without both.
 */
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tempStateDir } from '../test/support/postern.js';
import {
  BENCH_RATE_LIMITS,
  benchProject,
  benchSmtpConfig,
  cpuSeconds,
  peakRssMb,
  removeAfterBench,
  startBenchPostern,
} from './benchServer.js';
import { type PosternCost, posternProbe } from './serverCost.js';
import { runSmtpLoad, type SmtpLoadResult } from './smtpClient.js';

export interface SmtpIngestResult extends SmtpLoadResult {
  server_peak_rss_mb: number;
  /** The server's CPU per thread kind and flushes over the window, per message acknowledged in it. */
  cost: PosternCost;
  /** Rows the index holds for SMTP messages; at least `acknowledged_total`. */
  rows_stored: number;
}

export async function smtpIngestPhase(
  durationMs: number,
  warmupMs: number,
): Promise<SmtpIngestResult> {
  const stateDir = tempStateDir('postern-bench-smtp-');
  removeAfterBench(stateDir);
  const configFile = `${stateDir}/bench.json`;
  // Rate limits stay on but far above the offered load; nothing is relayed (ingest is measured,
  // and the provider below is a placeholder).
  writeFileSync(
    configFile,
    JSON.stringify({
      rate_limits: BENCH_RATE_LIMITS,
      delivery: { enabled: false },
      smtp: await benchSmtpConfig(),
    }),
  );
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configFile };
  const key = await benchProject(env, 'bench-smtp');
  const server = await startBenchPostern(stateDir, configFile);
  const pid = server.child.pid!;
  const probe = posternProbe([pid]);
  try {
    const listener = server.listeners.find(
      (l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'),
    );
    if (!listener) throw new Error('no production STARTTLS listener');
    const load = await runSmtpLoad(
      {
        host: listener.host,
        port: listener.port,
        credentials: { user: 'user', password: key.key },
        accepted: /^250 2\.0\.0 OK queued as m\.[0-9a-z]{26}$/,
        serverCpuSeconds: () => cpuSeconds(pid),
      },
      durationMs,
      warmupMs,
      undefined,
      probe,
    );
    await probe.close();
    const cost = await probe.cost(load.accepted);
    const rss = +peakRssMb(pid).toFixed(1);
    await server.stop();
    const db = new Database(`${stateDir}/postern.db`, { readonly: true });
    const rows = db
      .prepare("SELECT COUNT(*) FROM messages WHERE source = 'smtp'")
      .pluck()
      .get() as number;
    db.close();
    if (rows < load.acknowledged_total)
      throw new Error(
        `only ${rows} rows for ${load.acknowledged_total} acknowledged SMTP messages`,
      );
    return { ...load, server_peak_rss_mb: rss, cost, rows_stored: rows };
  } finally {
    if (server.child.exitCode === null && server.child.signalCode === null) await server.kill();
  }
}
