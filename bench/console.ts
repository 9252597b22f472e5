/**
 * Console bulk-action benchmark (`npm run bench`, or `BENCH_ONLY=console npm run bench`).
 *
 * A real Postern process with a console listener. Project A holds `BENCH_BULK_MESSAGES`
 * (10,000) queued messages waiting on the retry ladder; project B takes the send load: POST
 * /v1/send (1 KB text, 50 keep-alive clients, Node's client so every completion is timed)
 * without a break. `BENCH_BULK_ROUNDS` (10) times: the messages of A are put back on the ladder
 * (by the bench, then a pause so that write is out of the way), the load runs alone for a
 * control window, then an operator's API token retries all of A at once by filter over the
 * console API (POST /console/api/v1/messages/bulk). Reported: the bulk answer's time (the
 * acceptance target is under 2 s), and the accepts/s of the send load during the bulk actions
 * against the control windows of the same length just before each (target: within 10 %).
 */

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { systemClock } from '../src/clock.js';
import { buildConfig } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { createKey } from '../src/operator/keys.js';
import { createOperator, createOperatorToken } from '../src/operator/operators.js';
import { createProject } from '../src/operator/projects.js';
import { attachProvider } from '../src/operator/providers.js';
import { openDatabase } from '../src/store/db.js';
import { sqliteQueries } from '../src/store/queries.js';
import { tempStateDir } from '../test/support/postern.js';
import {
  BENCH_RATE_LIMITS,
  type Completion,
  cpuSeconds,
  removeAfterBench,
  runLoad,
  sleep,
  startBenchPostern,
} from './benchServer.js';

const MESSAGES = Number(process.env.BENCH_BULK_MESSAGES ?? 10_000);
const ROUNDS = Number(process.env.BENCH_BULK_ROUNDS ?? 10);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
const WARMUP_MS = 5000;
/** After the bench's own reset write, before the control window: that write is not the bulk action's. */
const SETTLE_MS = 1500;

export interface ConsoleBench {
  messages: number;
  rounds: number;
  concurrency: number;
  /** The bulk answers' times, ms. */
  bulk_ms: { p50: number; max: number; each: number[] };
  changed_per_round: number[];
  /** accepts/s of the send load during the bulk actions, and in the control windows just before. */
  accepts_per_s_during_bulk: number;
  accepts_per_s_control: number;
  slowdown_percent: number;
  errors: number;
  server_cpu_cores_during_bulk: number;
  server_cpu_cores_control: number;
}

const TEXT = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(18).slice(0, 1024);
const SEND_BODY = Buffer.from(
  JSON.stringify({
    from: 'Bench <bench@example.com>',
    to: 'rcpt@example.org',
    subject: 'Benchmark message',
    text: TEXT,
  }),
);

async function setUp(stateDir: string) {
  const db = openDatabase(stateDir, silentLogger());
  try {
    const config = buildConfig({ state_dir: stateDir }, {});
    const ctx = {
      store: sqliteQueries(db),
      clock: systemClock,
      config,
      spoolRoot: path.join(stateDir, 'spool'),
    };
    const bulk = await createProject(ctx, 'bench-bulk', 'pro');
    const load = await createProject(ctx, 'bench-load', 'pro');
    for (const p of [bulk, load])
      await attachProvider(ctx, p.id, { slug: 'smtp', host: '127.0.0.1', port: '9', tls: 'none' });
    // A chosen password: a generated one must be changed before the token may act.
    const owner = await createOperator(ctx, {
      email: 'bench@example.com',
      role: 'owner',
      password: 'bench console password',
    });
    return {
      bulkProject: bulk.id,
      bulkKey: (await createKey(ctx, bulk.id, 'live')).key,
      loadKey: (await createKey(ctx, load.id, 'live')).key,
      token: (await createOperatorToken(ctx, owner.id, 'bench')).token,
    };
  } finally {
    db.close();
  }
}

/** MESSAGES messages for project A, sent over the batch endpoint (100 per request, 8 requests at a time). */
async function fill(production: string, key: string): Promise<void> {
  const messages = Array.from(
    { length: 100 },
    () => JSON.parse(SEND_BODY.toString('utf8')) as unknown,
  );
  let sent = 0;
  const worker = async () => {
    while (sent < MESSAGES) {
      sent += 100;
      const res = await fetch(`${production}/v1/send/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages }),
      });
      if (res.status !== 207) throw new Error(`batch answered ${res.status}: ${await res.text()}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

const rate = (cs: Completion[], from: number, to: number) =>
  cs.filter((c) => c.ok && c.at >= from && c.at < to).length / ((to - from) / 1000);

export async function consoleBench(): Promise<ConsoleBench> {
  const stateDir = tempStateDir('postern-bench-console-');
  removeAfterBench(stateDir);
  const configFile = `${stateDir}/bench.json`;
  writeFileSync(
    configFile,
    JSON.stringify({ delivery: { enabled: false }, rate_limits: BENCH_RATE_LIMITS }),
  );
  const setup = await setUp(stateDir);
  const server = await startBenchPostern(stateDir, configFile);
  const control = new Database(`${stateDir}/postern.db`);
  control.pragma('busy_timeout = 10000');
  try {
    const consoleUrl = server.listeners.find((l) => l.protocol === 'console')!.url;
    await fill(server.production, setup.bulkKey);
    const backOnTheLadder = control.prepare(
      "UPDATE messages SET next_attempt_at = ?, attempts = 1 WHERE project_id = ? AND status = 'queued'",
    );
    let stop!: () => void;
    const until = new Promise<void>((resolve) => (stop = resolve));
    const load = runLoad(
      new URL('/v1/send', server.production),
      { authorization: `Bearer ${setup.loadKey}`, 'content-type': 'application/json' },
      SEND_BODY,
      until,
      CONCURRENCY,
    );
    await sleep(WARMUP_MS);
    const windows: {
      controlFrom: number;
      bulkFrom: number;
      bulkTo: number;
      changed: number;
      cpu: number;
    }[] = [];
    const controlCpu: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const reset = backOnTheLadder.run(Date.now() + 3600_000, setup.bulkProject).changes;
      if (reset !== MESSAGES)
        throw new Error(`${reset} messages put back on the ladder, not ${MESSAGES}`);
      await sleep(SETTLE_MS);
      const expected =
        windows.length > 0
          ? windows.reduce((a, w) => a + (w.bulkTo - w.bulkFrom), 0) / windows.length
          : 500;
      const controlFrom = performance.now();
      const cpuAtControl = cpuSeconds(server.child.pid!);
      await sleep(expected);
      const cpuBefore = cpuSeconds(server.child.pid!);
      const bulkFrom = performance.now();
      controlCpu.push((cpuBefore - cpuAtControl) / ((bulkFrom - controlFrom) / 1000));
      const res = await fetch(`${consoleUrl}/console/api/v1/messages/bulk`, {
        method: 'POST',
        headers: { authorization: `Bearer ${setup.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'retry', filter: { project: setup.bulkProject } }),
      });
      const bulkTo = performance.now();
      const answer = (await res.json()) as { changed?: number };
      if (res.status !== 200)
        throw new Error(`bulk retry answered ${res.status}: ${JSON.stringify(answer)}`);
      windows.push({
        controlFrom,
        bulkFrom,
        bulkTo,
        changed: answer.changed ?? 0,
        cpu: (cpuSeconds(server.child.pid!) - cpuBefore) / ((bulkTo - bulkFrom) / 1000),
      });
    }
    stop();
    const completions = await load;
    const during =
      windows.reduce(
        (a, w) => a + rate(completions, w.bulkFrom, w.bulkTo) * (w.bulkTo - w.bulkFrom),
        0,
      ) / windows.reduce((a, w) => a + (w.bulkTo - w.bulkFrom), 0);
    const before =
      windows.reduce(
        (a, w) => a + rate(completions, w.controlFrom, w.bulkFrom) * (w.bulkFrom - w.controlFrom),
        0,
      ) / windows.reduce((a, w) => a + (w.bulkFrom - w.controlFrom), 0);
    const times = windows.map((w) => Math.round(w.bulkTo - w.bulkFrom));
    const sorted = [...times].sort((x, y) => x - y);
    return {
      messages: MESSAGES,
      rounds: ROUNDS,
      concurrency: CONCURRENCY,
      bulk_ms: {
        p50: sorted[Math.floor(sorted.length / 2)],
        max: sorted[sorted.length - 1],
        each: times,
      },
      changed_per_round: windows.map((w) => w.changed),
      accepts_per_s_during_bulk: Math.round(during),
      accepts_per_s_control: Math.round(before),
      slowdown_percent: +((1 - during / before) * 100).toFixed(1),
      errors: completions.filter((c) => !c.ok).length,
      server_cpu_cores_during_bulk: +(
        windows.reduce((a, w) => a + w.cpu, 0) / windows.length
      ).toFixed(2),
      server_cpu_cores_control: +(
        controlCpu.reduce((a, c) => a + c, 0) / controlCpu.length
      ).toFixed(2),
    };
  } finally {
    control.close();
    await server.stop();
  }
}

export function consoleLines(b: ConsoleBench): string[] {
  return [
    `console: bulk retry by filter of ${b.messages} waiting messages over the console API, ${b.rounds} rounds: answered in p50 ${b.bulk_ms.p50} ms, max ${b.bulk_ms.max} ms (${b.bulk_ms.each.join(', ')}); changed ${b.changed_per_round.join(', ')}`,
    `console: POST /v1/send (1 KB text, ${b.concurrency} clients, another project) during the bulk actions ${b.accepts_per_s_during_bulk} accepts/s, in equal windows just before ${b.accepts_per_s_control} accepts/s: ` +
      `${b.slowdown_percent >= 0 ? 'slower' : 'faster'} by ${Math.abs(b.slowdown_percent)}%; server CPU ${b.server_cpu_cores_during_bulk} cores during the bulk actions, ${b.server_cpu_cores_control} before; errors ${b.errors}`,
  ];
}
