/**
 * Webhook benchmark (`npm run bench`, or `BENCH_ONLY=webhooks npm run bench` for this section).
 *
 * 1. Delivery throughput: `BENCH_WEBHOOK_EVENTS` (10,000) events waiting in the outbox of a real
 *    Postern process (default webhook settings), delivered to a receiver in its own process on
 *    127.0.0.1 (a minimal HTTP/1.1 server) that verifies every signature and answers 204. deliveries/s = receiver arrivals
 *    per second between the first and the last.
 * 2. Acceptance with the dispatcher idle and working, in the same run and on the same server:
 *    POST /v1/send (1 KB text, 50 keep-alive clients) without a break, while the project's
 *    endpoint is registered and removed in windows of `BENCH_WEBHOOK_WINDOW_SECONDS` (3),
 *    `BENCH_WEBHOOK_WINDOWS` (24) of them, off on on off …; with it registered every accepted message is
 *    delivered as a webhook meanwhile. Short alternating windows keep the two conditions under
 *    the same disk and CPU weather (these machines are shared and noisy).
 *
 * The receiver stands for the customer's server, which is not on Postern's machine: it runs at
 * the dispatcher thread's default priority (SCHED_IDLE; `BENCH_RECEIVER_PRIORITY` = idle or a
 * nice value), so it uses only the CPU acceptance leaves, as the dispatcher does. `BENCH_WEBHOOK_CONFIG` (JSON) overrides webhook
 * settings for both measurements.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { systemClock } from '../src/clock.js';
import { buildConfig } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { createKey } from '../src/operator/keys.js';
import { createProject } from '../src/operator/projects.js';
import { attachProvider } from '../src/operator/providers.js';
import { addWebhook, removeWebhook } from '../src/operator/webhookEndpoints.js';
import { openDatabase } from '../src/store/db.js';
import { insertEvent } from '../src/store/events.js';
import { sqliteQueries } from '../src/store/queries.js';
import { type SpawnedPostern, tempStateDir } from '../test/support/postern.js';
import {
  BENCH_RATE_LIMITS,
  type Completion,
  countByStatus,
  cpuSeconds,
  peakRssMb,
  removeAfterBench,
  runLoad,
  sleep,
  startBenchPostern,
} from './benchServer.js';

export const WEBHOOK_EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
/** Alternating windows of the acceptance measurement (off, on, off, …) and their length. */
const WINDOWS = Number(process.env.BENCH_WEBHOOK_WINDOWS ?? 24);
const WINDOW_MS = Number(process.env.BENCH_WEBHOOK_WINDOW_SECONDS ?? 3) * 1000;
const GUARD_MS = 500;
const WARMUP_MS = 5000;
const RECEIVER_PRIORITY: 'idle' | number =
  (process.env.BENCH_RECEIVER_PRIORITY ?? 'idle') === 'idle'
    ? 'idle'
    : Number(process.env.BENCH_RECEIVER_PRIORITY);
/** Webhook settings to try instead of the defaults (JSON), e.g. BENCH_WEBHOOK_CONFIG='{"nice":0}'. */
const EXTRA_WEBHOOK_CONFIG = JSON.parse(process.env.BENCH_WEBHOOK_CONFIG ?? '{}') as Record<
  string,
  unknown
>;

// ---------------------------------------------------------------------------------------------
// The receiver: a separate process (`node dist/bench/webhooks.js --receiver`)
// ---------------------------------------------------------------------------------------------

interface ReceiverStats {
  count: number;
  distinct: number;
  bad_signatures: number;
  first_ms: number;
  last_ms: number;
}

/**
 * A minimal HTTP/1.1 keep-alive server on raw TCP: Content-Length bodies only (what Postern
 * sends), one response per request in order. Node's http server would spend about 90 µs of
 * these two shared cores per request, CPU the customer's server spends on its own machine;
 * this one spends a fraction of that, so the bench measures Postern's cost, not its peer's.
 */
function runReceiver(): void {
  let secret = '';
  const stats: ReceiverStats = {
    count: 0,
    distinct: 0,
    bad_signatures: 0,
    first_ms: 0,
    last_ms: 0,
  };
  const seen = new Set<string>();
  const NO_CONTENT = Buffer.from('HTTP/1.1 204 No Content\r\n\r\n');
  const handle = (target: string, headers: Map<string, string>, raw: Buffer): Buffer => {
    if (target === '/__secret') {
      secret = raw.toString('utf8');
      return NO_CONTENT;
    }
    if (target === '/__stats') {
      const body = JSON.stringify(stats);
      return Buffer.from(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    }
    const m = /^t=(\d+),v1=([0-9a-f]{64})/.exec(headers.get('x-service-signature') ?? '');
    const expected = createHmac('sha256', secret).update(`${m?.[1]}.`).update(raw).digest();
    if (!m || !timingSafeEqual(expected, Buffer.from(m[2], 'hex'))) stats.bad_signatures++;
    const id = headers.get('x-service-delivery') ?? '';
    if (!seen.has(id)) {
      seen.add(id);
      stats.distinct++;
    }
    const now = Date.now();
    if (stats.count === 0) stats.first_ms = now;
    stats.count++;
    stats.last_ms = now;
    return NO_CONTENT;
  };
  const server = net.createServer((socket) => {
    let buffered: Buffer = Buffer.alloc(0);
    socket.setNoDelay(true);
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const replies: Buffer[] = [];
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) break;
        const lines = buffered.subarray(0, end).toString('latin1').split('\r\n');
        const headers = new Map<string, string>();
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          if (colon > 0)
            headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
        }
        if (headers.has('transfer-encoding')) {
          socket.end(
            'HTTP/1.1 411 Length Required\r\nconnection: close\r\ncontent-length: 0\r\n\r\n',
          );
          return;
        }
        const length = Number(headers.get('content-length') ?? 0);
        if (buffered.length < end + 4 + length) break;
        const body = buffered.subarray(end + 4, end + 4 + length);
        replies.push(handle(lines[0].split(' ')[1] ?? '/', headers, body));
        buffered = buffered.subarray(end + 4 + length);
      }
      if (replies.length > 0)
        socket.write(replies.length === 1 ? replies[0] : Buffer.concat(replies));
    });
  });
  server.listen(0, '127.0.0.1', () =>
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`),
  );
}

interface Receiver {
  child: ChildProcess;
  port: number;
  url: string;
  setSecret(secret: string): Promise<void>;
  stats(): Promise<ReceiverStats>;
  stop(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--receiver'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once('line', (l) => {
      rl.close();
      resolve(l);
    });
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
  });
  // The receiver stands for the customer's server, which is not on Postern's machine: on these
  // shared cores it runs at the dispatcher's priority, so it uses what acceptance leaves.
  if (RECEIVER_PRIORITY === 'idle') {
    // Every thread of it (util-linux chrt); without chrt it runs at normal priority.
    spawnSync('chrt', ['--idle', '--all-tasks', '--pid', '0', String(child.pid)], {
      stdio: 'ignore',
    });
  } else {
    try {
      os.setPriority(child.pid!, RECEIVER_PRIORITY);
    } catch {
      /* not permitted: it runs at normal priority */
    }
  }
  const port = (JSON.parse(line) as { port: number }).port;
  const call = (p: string, body?: string) =>
    fetch(`http://127.0.0.1:${port}${p}`, { method: 'POST', body }).then((r) => r.text());
  return {
    child,
    port,
    url: `http://127.0.0.1:${port}/hooks`,
    setSecret: async (secret) => void (await call('/__secret', secret)),
    stats: async () => JSON.parse(await call('/__stats')) as ReceiverStats,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Set-up: project, key, provider (unused), endpoint, written before the server owns the directory
// ---------------------------------------------------------------------------------------------

interface Setup {
  stateDir: string;
  key: string;
  projectId: string;
  secret: string | null;
}

async function setUp(receiverUrl: string | null): Promise<Setup> {
  const stateDir = tempStateDir('postern-bench-webhooks-');
  const db = openDatabase(stateDir, silentLogger());
  try {
    const config = buildConfig(
      { state_dir: stateDir, webhooks: { allow_private_targets: true } },
      {},
    );
    const ctx = {
      store: sqliteQueries(db),
      clock: systemClock,
      config,
      spoolRoot: path.join(stateDir, 'spool'),
    };
    const project = await createProject(ctx, 'bench-webhooks', 'pro');
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: '9',
      tls: 'none',
    });
    const key = (await createKey(ctx, project.id, 'live')).key;
    const secret = receiverUrl ? (await addWebhook(ctx, project.id, receiverUrl)).secret : null;
    return { stateDir, key, projectId: project.id, secret };
  } finally {
    db.close();
  }
}

function writeConfig(setup: Setup, name: string, webhooks: Record<string, unknown>): string {
  const file = `${setup.stateDir}/${name}`;
  writeFileSync(
    file,
    JSON.stringify({ rate_limits: BENCH_RATE_LIMITS, delivery: { enabled: false }, webhooks }),
  );
  return file;
}

function start(setup: Setup, config: string): Promise<SpawnedPostern> {
  return startBenchPostern(setup.stateDir, config);
}

// ---------------------------------------------------------------------------------------------
// 1. Delivery throughput from a backlog
// ---------------------------------------------------------------------------------------------

export interface WebhookThroughput {
  events: number;
  delivered: number;
  seconds: number;
  deliveries_per_s: number;
  bad_signatures: number;
  duplicates: number;
  server_cpu_cores: number;
  receiver_cpu_cores: number;
  server_peak_rss_mb: number;
  per_endpoint_concurrency: number;
  final_statuses: Record<string, number>;
}

export async function webhookThroughputPhase(events = WEBHOOK_EVENTS): Promise<WebhookThroughput> {
  const receiver = await startReceiver();
  const setup = await setUp(receiver.url);
  try {
    await receiver.setSecret(setup.secret!);
    // The backlog: mail.accepted events as acceptance records them (about 450 bytes of data each).
    const db = openDatabase(setup.stateDir, silentLogger());
    const now = Date.now();
    await sqliteQueries(db).transaction(async (tx) => {
      for (let i = 0; i < events; i++) {
        const uid = `m.bench${String(i).padStart(19, '0')}`;
        const data = {
          mail: {
            uid,
            subject: `Webhook benchmark ${i}`,
            from: 'bench@example.com',
            to: ['rcpt@example.org'],
            project: { uid: setup.projectId, name: 'bench-webhooks' },
            tags: ['bench', 'webhooks'],
            metadata: { order_id: String(100000 + i), customer: 'c-42', campaign: 'spring' },
          },
          status: 'queued',
          environment: 'production',
        };
        await insertEvent(tx, {
          project_id: setup.projectId,
          message_id: uid,
          type: 'mail.accepted',
          created_at: now,
          data: JSON.stringify(data),
        });
      }
    });
    db.close();
    const config = writeConfig(setup, 'webhooks-on.json', {
      allow_private_targets: true,
      ...EXTRA_WEBHOOK_CONFIG,
    });
    const server = await start(setup, config);
    try {
      const pid = server.child.pid!;
      const cpu0 = { server: cpuSeconds(pid), receiver: cpuSeconds(receiver.child.pid!) };
      const t0 = Date.now();
      let stats = await receiver.stats();
      while (stats.count < events && Date.now() - t0 < 120_000) {
        await sleep(200);
        stats = await receiver.stats();
      }
      const wall = (Date.now() - t0) / 1000;
      const cpu1 = { server: cpuSeconds(pid), receiver: cpuSeconds(receiver.child.pid!) };
      const seconds = Math.max(0.001, (stats.last_ms - stats.first_ms) / 1000);
      // Outcomes are written a few milliseconds after the answers.
      await sleep(500);
      const rss = peakRssMb(pid);
      await server.stop();
      return {
        events,
        delivered: stats.distinct,
        seconds: +seconds.toFixed(2),
        deliveries_per_s: Math.round((stats.count - 1) / seconds),
        bad_signatures: stats.bad_signatures,
        duplicates: stats.count - stats.distinct,
        server_cpu_cores: +((cpu1.server - cpu0.server) / wall).toFixed(2),
        receiver_cpu_cores: +((cpu1.receiver - cpu0.receiver) / wall).toFixed(2),
        server_peak_rss_mb: +rss.toFixed(1),
        per_endpoint_concurrency: buildConfig({}, {}).webhooks.per_endpoint_concurrency,
        final_statuses: countByStatus(setup.stateDir, 'webhook_deliveries'),
      };
    } finally {
      if (server.child.exitCode === null) await server.kill();
    }
  } finally {
    await receiver.stop();
    removeAfterBench(setup.stateDir);
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Acceptance with the dispatcher idle and working, alternating on one server
// ---------------------------------------------------------------------------------------------

interface Window {
  webhooks: boolean;
  start: number;
  end: number;
  delivered: number;
  serverCpu: number;
}

/**
 * One server under constant load; the project's endpoint is registered and removed every
 * WINDOW_MS (off, on, off, on, …). Off windows: the dispatcher runs but has no endpoint (idle).
 * On windows: every accepted message is delivered as a webhook while the load goes on. The first
 * GUARD_MS of each window (the switch) is not counted.
 */
async function alternatingAcceptPhase(
  receiver: Receiver,
  body: Buffer,
): Promise<{ windows: Window[]; completions: Completion[] }> {
  const setup = await setUp(null);
  try {
    const config = writeConfig(setup, 'bench.json', {
      allow_private_targets: true,
      ...EXTRA_WEBHOOK_CONFIG,
    });
    const server = await start(setup, config);
    const control = openDatabase(setup.stateDir, silentLogger());
    try {
      const ctx = {
        store: sqliteQueries(control),
        clock: systemClock,
        config: buildConfig(
          { state_dir: setup.stateDir, webhooks: { allow_private_targets: true } },
          {},
        ),
        spoolRoot: path.join(setup.stateDir, 'spool'),
      };
      const pid = server.child.pid!;
      let stop!: () => void;
      const until = new Promise<void>((resolve) => (stop = resolve));
      const load = runLoad(
        new URL('/v1/send', server.production),
        { authorization: `Bearer ${setup.key}`, 'content-type': 'application/json' },
        body,
        until,
        CONCURRENCY,
      );
      // A longer warm-up here: the server's JIT and page cache settle in the first seconds.
      await sleep(WARMUP_MS);
      const windows: Window[] = [];
      let hook: string | null = null;
      for (let w = 0; w < WINDOWS; w++) {
        // off, on, on, off, off, on, on, off, …: a drift over the run weighs on both alike.
        const on = Math.floor((w + 1) / 2) % 2 === 1;
        if (on && !hook) {
          const added = await addWebhook(ctx, setup.projectId, receiver.url);
          await receiver.setSecret(added.secret);
          hook = added.id;
        } else if (!on && hook) {
          await removeWebhook(ctx, hook);
          hook = null;
        }
        await sleep(GUARD_MS);
        const before = {
          stats: await receiver.stats(),
          cpu: cpuSeconds(pid),
          at: performance.now(),
        };
        await sleep(WINDOW_MS - GUARD_MS);
        const after = {
          stats: await receiver.stats(),
          cpu: cpuSeconds(pid),
          at: performance.now(),
        };
        windows.push({
          webhooks: on,
          start: before.at,
          end: after.at,
          delivered: after.stats.count - before.stats.count,
          serverCpu: (after.cpu - before.cpu) / ((after.at - before.at) / 1000),
        });
      }
      stop();
      const completions = await load;
      await server.stop();
      return { windows, completions };
    } finally {
      control.close();
      if (server.child.exitCode === null) await server.kill();
    }
  } finally {
    removeAfterBench(setup.stateDir);
  }
}

interface ModeSummary {
  per_s: number;
  p50_ms: number;
  p99_ms: number;
  errors: number;
  server_cpu_cores: number;
  deliveries_per_s: number;
  seconds: number;
}

export interface WebhookBench {
  throughput: WebhookThroughput;
  accept: {
    windows: number;
    window_s: number;
    concurrency: number;
    /** Dispatcher running, no endpoint registered. */
    idle: ModeSummary;
    /** One endpoint receiving a webhook for every accepted message. */
    delivering: ModeSummary;
    slowdown_percent: number;
    /** accepts/s and deliveries/s of each window, in run order. */
    per_window: { webhooks: boolean; accepts_per_s: number; deliveries_per_s: number }[];
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export async function webhookBench(): Promise<WebhookBench> {
  const throughput = await webhookThroughputPhase();
  const text = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '
    .repeat(18)
    .slice(0, 1024);
  const body = Buffer.from(
    JSON.stringify({
      from: 'Bench <bench@example.com>',
      to: 'rcpt@example.org',
      subject: 'Benchmark message',
      text,
    }),
  );
  const receiver = await startReceiver();
  let run: { windows: Window[]; completions: Completion[] };
  try {
    run = await alternatingAcceptPhase(receiver, body);
  } finally {
    await receiver.stop();
  }
  const inWindow = (w: Window) => run.completions.filter((c) => c.at >= w.start && c.at < w.end);
  const summary = (on: boolean): ModeSummary => {
    const ws = run.windows.filter((w) => w.webhooks === on);
    const seconds = ws.reduce((a, w) => a + (w.end - w.start) / 1000, 0);
    const cs = ws.flatMap(inWindow);
    const lat = cs.map((c) => c.ms).sort((a, b) => a - b);
    return {
      per_s: Math.round(cs.filter((c) => c.ok).length / seconds),
      p50_ms: +percentile(lat, 50).toFixed(2),
      p99_ms: +percentile(lat, 99).toFixed(2),
      errors: cs.filter((c) => !c.ok).length,
      server_cpu_cores: +(ws.reduce((a, w) => a + w.serverCpu, 0) / ws.length).toFixed(2),
      deliveries_per_s: Math.round(ws.reduce((a, w) => a + w.delivered, 0) / seconds),
      seconds: +seconds.toFixed(1),
    };
  };
  const idle = summary(false);
  const delivering = summary(true);
  return {
    throughput,
    accept: {
      windows: WINDOWS,
      window_s: WINDOW_MS / 1000,
      concurrency: CONCURRENCY,
      idle,
      delivering,
      slowdown_percent: +((1 - delivering.per_s / idle.per_s) * 100).toFixed(1),
      per_window: run.windows.map((w) => ({
        webhooks: w.webhooks,
        accepts_per_s: Math.round(
          inWindow(w).filter((c) => c.ok).length / ((w.end - w.start) / 1000),
        ),
        deliveries_per_s: Math.round(w.delivered / ((w.end - w.start) / 1000)),
      })),
    },
  };
}

export function webhookLines(b: WebhookBench): string[] {
  const t = b.throughput;
  const a = b.accept;
  return [
    `webhooks: ${t.events} queued events delivered to a local receiver (own process at ${RECEIVER_PRIORITY === 'idle' ? 'SCHED_IDLE' : `nice ${RECEIVER_PRIORITY}`}, minimal HTTP/1.1, verifies every signature, 204; one endpoint, per-endpoint concurrency ${t.per_endpoint_concurrency}, default settings): ` +
      `${t.deliveries_per_s} deliveries/s (${t.delivered} in ${t.seconds}s), bad signatures ${t.bad_signatures}, duplicates ${t.duplicates}; ` +
      `server CPU ${t.server_cpu_cores} cores, receiver ${t.receiver_cpu_cores}, server peak RSS ${t.server_peak_rss_mb} MiB; final ${JSON.stringify(t.final_statuses)}`,
    `webhooks: POST /v1/send (1 KB text, ${a.concurrency} clients) on one server, the endpoint registered and removed in alternating ${a.window_s}s windows (${a.windows}, off on on off …): ` +
      `no endpoint ${a.idle.per_s} accepts/s (p50 ${a.idle.p50_ms} ms, p99 ${a.idle.p99_ms} ms, server CPU ${a.idle.server_cpu_cores}); ` +
      `a webhook per accepted message ${a.delivering.per_s} accepts/s (p50 ${a.delivering.p50_ms} ms, p99 ${a.delivering.p99_ms} ms, server CPU ${a.delivering.server_cpu_cores}) ` +
      `with ${a.delivering.deliveries_per_s} deliveries/s alongside; acceptance ${a.slowdown_percent >= 0 ? 'slower' : 'faster'} by ${Math.abs(a.slowdown_percent)}%; errors ${a.idle.errors + a.delivering.errors}`,
  ];
}

if (
  process.argv[1] &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url) &&
  process.argv[2] === '--receiver'
)
  runReceiver();
