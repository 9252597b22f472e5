/**
 * End-to-end relay benchmark: 2 KB messages accepted over HTTP (POST /v1/send) and SMTP
 * (STARTTLS + AUTH, nodemailer pools) by a real Postern process with delivery on, relayed to a
 * local sink (Postfix's `smtp-sink` when it is installed, else an smtp-server in this process).
 * Delivered = rows recorded `sent` (the sink answered 250) in the measured window.
 *
 * Second measurement: a queue of `BENCH_QUEUE` (default 100,000) messages accepted with
 * delivery off (batches of 100, 8 in flight), then a restart with delivery on: the server's
 * RSS while the scheduler works through that queue (time-bounded by BENCH_DRAIN_SECONDS).
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, fstatSync, openSync, readSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import nodemailer, { type Transporter } from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import { type SpawnedPostern, tempStateDir } from '../test/support/postern.js';
import {
  BENCH_RATE_LIMITS,
  benchProject,
  benchSmtpConfig,
  countByStatus,
  cpuSeconds,
  onBenchExit,
  postOnce,
  processMemoryMb,
  removeAfterBench,
  sleep,
  startBenchPostern,
} from './benchServer.js';
import { type PosternCost, posternProbe } from './serverCost.js';
import { ARM_LEAD_MS, type WindowHooks } from './smtpClient.js';

const MESSAGE_BYTES = 2048;
export const RELAY_SECONDS = Number(process.env.BENCH_RELAY_SECONDS ?? 10);
export const RELAY_HTTP_CLIENTS = Number(process.env.BENCH_RELAY_HTTP_CLIENTS ?? 40);
export const RELAY_SMTP_SESSIONS = Number(process.env.BENCH_RELAY_SMTP_SESSIONS ?? 10);
export const QUEUE_SIZE = Number(process.env.BENCH_QUEUE ?? 100_000);
export const DRAIN_SECONDS = Number(process.env.BENCH_DRAIN_SECONDS ?? 30);
export const RELAY_WARMUP_MS = 2000;
/** After the load: how long the backlog may take to drain before the bench moves on. */
export const RELAY_DRAIN_BOUND_MS = 30_000;

/**
 * Delivery on its defaults (20 hand-offs at once per account over 20 pooled connections, woken by
 * each acceptance), as Postfix beside it runs on its own (20 per destination): the figure an
 * operator gets without tuning. (Until 26 November the bench used 100 connections and a 20 ms
 * poll, settings no operator had.)
 */
const DELIVERY = { enabled: true };

const FILLER = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ';
/** The text of an HTTP message: with the headers Postern composes, the stored MIME is about 2 KB. */
const HTTP_TEXT = FILLER.repeat(Math.ceil(MESSAGE_BYTES / FILLER.length)).slice(0, 1680);

// ---------------------------------------------------------------------------------------------
// The sink
// ---------------------------------------------------------------------------------------------

export interface Sink {
  kind: 'smtp-sink' | 'smtp-server';
  port: number;
  pid: number | null;
  /** Messages the sink has answered 250 to the final dot of, so far. */
  delivered(): number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** Resolves once 127.0.0.1:`port` takes connections; `gone` says why waiting is pointless (the process exited), else null. */
export async function waitForPort(
  port: number,
  what: string,
  gone: () => string | null,
  tries = 100,
): Promise<void> {
  for (let i = 0; i < tries; i++) {
    const why = gone();
    if (why) throw new Error(`${what}: ${why}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`${what} did not listen on ${port}`);
}

function smtpSinkPath(): string | null {
  const found = spawnSync(
    'sh',
    ['-c', 'command -v smtp-sink || ls /usr/sbin/smtp-sink 2>/dev/null'],
    { encoding: 'utf8' },
  );
  const p = found.stdout.trim().split('\n')[0];
  return p ? p : null;
}

/** The last `mesg=N` smtp-sink's `-c` counter wrote to `file` (it rewrites one line with \r per message). */
function lastSinkCount(file: string): number {
  const fd = openSync(file, 'r');
  try {
    const tail = Buffer.alloc(256);
    const size = readSync(fd, tail, 0, tail.length, Math.max(0, fstatSync(fd).size - tail.length));
    const counts = [
      ...tail
        .subarray(0, size)
        .toString('latin1')
        .matchAll(/mesg=(\d+)/g),
    ];
    return counts.length > 0 ? Number(counts[counts.length - 1][1]) : 0;
  } finally {
    closeSync(fd);
  }
}

/**
 * Postfix's smtp-sink (a separate process: the bench process stays free) or, without it, an
 * smtp-server here. smtp-sink counts what it receives (`-c`) into a file the bench reads: the
 * figure at the sink, the same for every server relaying to it.
 */
export async function startSink(): Promise<Sink> {
  const bin = smtpSinkPath();
  if (bin) {
    const port = await freePort();
    const dir = tempStateDir('postern-bench-sink-');
    removeAfterBench(dir);
    const countFile = `${dir}/count`;
    const out = openSync(countFile, 'w');
    const args = [
      ...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []),
      '-c',
      '-m',
      '512',
      `127.0.0.1:${port}`,
      '1024',
    ];
    const child = spawn(bin, args, { stdio: ['ignore', out, 'ignore'] });
    closeSync(out);
    onBenchExit(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    await waitForPort(port, 'smtp-sink', () =>
      child.exitCode !== null ? `exited with ${child.exitCode}` : null,
    );
    return {
      kind: 'smtp-sink',
      port,
      pid: child.pid ?? null,
      delivered: () => lastSinkCount(countFile),
      async stop() {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        await exited;
      },
    };
  }
  let n = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    maxClients: 512,
    onData(stream, _session, callback) {
      stream.on('data', () => {});
      stream.on('end', () => callback(null, `OK queued as ${++n}`));
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    kind: 'smtp-server',
    port: (server.server.address() as AddressInfo).port,
    pid: null,
    delivered: () => n,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// ---------------------------------------------------------------------------------------------
// Set-up
// ---------------------------------------------------------------------------------------------

export interface RelaySetup {
  stateDir: string;
  key: string;
  configOn: string;
  configOff: string;
}

/** The store bench servers run on: their state directory's SQLite index (the default), or a PostgreSQL database their nodes share. */
export type BenchStore = { backend: 'sqlite' } | { backend: 'postgres'; url: string };

/** The environment that puts a server, or the CLI, on `store`. */
export function storeEnv(store: BenchStore): Record<string, string> {
  return store.backend === 'postgres'
    ? { POSTERN_STORE_BACKEND: 'postgres', POSTERN_DATABASE_URL: store.url }
    : {};
}

/**
 * A state directory with two configs (delivery on and off) and, on `store`, a project with an
 * `smtp` provider pointing at the sink and a live key, made with the CLI.
 */
export async function setUp(
  sinkPort: number,
  prefix: string,
  store: BenchStore = { backend: 'sqlite' },
): Promise<RelaySetup> {
  const stateDir = tempStateDir(prefix);
  removeAfterBench(stateDir);
  const configOn = `${stateDir}/relay-on.json`;
  const configOff = `${stateDir}/relay-off.json`;
  const smtp = await benchSmtpConfig();
  writeFileSync(
    configOn,
    JSON.stringify({ rate_limits: BENCH_RATE_LIMITS, delivery: DELIVERY, smtp }),
  );
  writeFileSync(
    configOff,
    JSON.stringify({
      rate_limits: BENCH_RATE_LIMITS,
      delivery: { ...DELIVERY, enabled: false },
      smtp,
    }),
  );
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configOff, ...storeEnv(store) };
  const { key } = await benchProject(env, 'bench-relay', sinkPort);
  return { stateDir, key, configOn, configOff };
}

function start(setup: RelaySetup, config: string): Promise<SpawnedPostern> {
  return startBenchPostern(setup.stateDir, config);
}

function averageSize(stateDir: string): number {
  const db = new Database(`${stateDir}/postern.db`, { readonly: true, fileMustExist: true });
  try {
    return Math.round(
      (db.prepare('SELECT AVG(size_bytes) FROM messages').pluck().get() as number | null) ?? 0,
    );
  } finally {
    db.close();
  }
}

function countSent(stateDir: string): number {
  const db = new Database(`${stateDir}/postern.db`, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    return db
      .prepare("SELECT COUNT(*) FROM messages WHERE status = 'sent'")
      .pluck()
      .get() as number;
  } finally {
    db.close();
  }
}

/** A 2 KB message for POST /v1/send: the stored MIME is about 2 KB. */
function httpBody(tag: string): Buffer {
  const head = {
    from: 'Bench <bench@example.com>',
    to: 'rcpt@example.org',
    subject: `Relay benchmark ${tag}`,
  };
  return Buffer.from(JSON.stringify({ ...head, text: HTTP_TEXT }));
}

/** A 2,048-byte MIME message for SMTP (no Message-ID: Postern adds one). */
function smtpMessage(tag: string): string {
  const head = `From: Bench <bench@example.com>\r\nTo: rcpt@example.org\r\nSubject: Relay benchmark ${tag}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n`;
  const lines: string[] = [];
  let used = head.length;
  while (used < MESSAGE_BYTES - 2) {
    const line = FILLER.slice(0, Math.min(72, MESSAGE_BYTES - used - 2));
    lines.push(line);
    used += line.length + 2;
  }
  return `${head}${lines.join('\r\n')}\r\n`;
}

// ---------------------------------------------------------------------------------------------
// Throughput: accept over HTTP and SMTP while relaying to the sink
// ---------------------------------------------------------------------------------------------

export interface RelayThroughputResult {
  sink: string;
  seconds: number;
  http_clients: number;
  smtp_sessions: number;
  message_bytes: number;
  accepted_http_per_s: number;
  accepted_smtp_per_s: number;
  accepted_per_s: number;
  delivered_per_s: number;
  /** What the sink counted in the window (the figure the Postfix comparison reads on both sides). */
  delivered_at_sink_per_s: number;
  /** What the sink counted from the window's start until the backlog drained (or the drain's bound): the messages `cost` is per. */
  delivered_at_sink_through_drain: number;
  /** The server's CPU per thread kind and flushes from the window's start until the backlog drained, per message the sink counted meanwhile. */
  cost: PosternCost;
  /** Accepted but not yet sent when the window closed (growth means delivery lags acceptance). */
  backlog_at_start: number;
  backlog_at_end: number;
  errors: number;
  error_samples: string[];
  server_peak_rss_mb: number;
  server_cpu_cores: number;
  generator_cpu_cores: number;
  sink_cpu_cores: number;
  /** After the load stopped: seconds until every accepted message was sent (bounded to 30 s), and the rate of that drain. */
  drain_after_load_s: number;
  delivered_after_load_per_s: number;
  /** Average stored MIME size of the messages (HTTP and SMTP). */
  stored_message_bytes_avg: number;
  final_statuses: Record<string, number>;
}

/** The servers a relay load runs against: one, or several nodes on one store; the key it sends with; the store's count of `sent` rows. */
export interface RelayTargets {
  nodes: SpawnedPostern[];
  key: string;
  countSent(): Promise<number>;
}

/** What driveRelay measured (RelayThroughputResult's figures that do not read the store). */
export type RelayDrive = Omit<
  RelayThroughputResult,
  'sink' | 'server_peak_rss_mb' | 'stored_message_bytes_avg' | 'final_statuses' | 'cost'
> & {
  /** Every message acknowledged from the first request to the last, warm-up included, and how many of them were sent by the end of the drain. */
  accepted_total: number;
  sent_total: number;
  /** Messages sent when the measured window opened. */
  sent_at_start: number;
};

interface Snapshot {
  sent: number;
  atSink: number;
  accepted: number;
  serverCpu: number;
  sinkCpu: number;
  genCpu: number;
}

/**
 * The relay load on `targets` (the HTTP clients and SMTP sessions spread over the nodes in turn)
 * for a warm-up and `seconds`, then waits, bounded, until every acknowledged message is sent.
 * The servers keep running. `probe` (bench/serverCost.ts) is armed a second before the measured
 * window, opened with it, and closed once the backlog has drained.
 */
export async function driveRelay(
  targets: RelayTargets,
  sink: Sink,
  seconds: number,
  probe?: WindowHooks & { close(): Promise<void> },
): Promise<RelayDrive> {
  const { nodes } = targets;
  const transports: Transporter[] = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: RELAY_HTTP_CLIENTS });
  try {
    const smtpListeners = nodes.map((node) => {
      const listener = node.listeners.find(
        (l) =>
          l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'),
      );
      if (!listener) throw new Error('no production STARTTLS listener');
      return listener;
    });
    const urls = nodes.map((node) => new URL('/v1/send', node.production));
    const headers = { authorization: `Bearer ${targets.key}`, 'content-type': 'application/json' };
    const measureFrom = performance.now() + RELAY_WARMUP_MS;
    const stopAt = measureFrom + seconds * 1000;
    let httpOk = 0;
    let smtpOk = 0;
    let errors = 0;
    const errorSamples: string[] = [];
    const fail = (why: string) => {
      errors++;
      if (errorSamples.length < 5) errorSamples.push(why);
    };
    let acceptedTotal = 0;
    const snap = async (): Promise<Snapshot> => {
      const u = process.cpuUsage();
      const accepted = acceptedTotal;
      return {
        sent: await targets.countSent(),
        atSink: sink.delivered(),
        accepted,
        serverCpu: nodes.reduce((sum, node) => sum + cpuSeconds(node.child.pid!), 0),
        sinkCpu: sink.pid ? cpuSeconds(sink.pid) : 0,
        genCpu: (u.user + u.system) / 1e6,
      };
    };
    const marks: { begin?: Promise<Snapshot> } = {};
    let armed: Promise<void> = Promise.resolve();
    let opened: Promise<void> = Promise.resolve();
    const armTimer = setTimeout(
      () => (armed = probe?.arm() ?? armed),
      Math.max(0, RELAY_WARMUP_MS - ARM_LEAD_MS),
    );
    const snapTimer = setTimeout(() => {
      opened = probe?.open() ?? opened;
      marks.begin = snap();
    }, RELAY_WARMUP_MS);
    const httpLoop = async (n: number) => {
      const url = urls[n % urls.length];
      for (let i = 0; ; i++) {
        const t0 = performance.now();
        if (t0 >= stopAt) return;
        const code = await postOnce(url, agent, headers, httpBody(`h${n}.${i}`));
        if (code === 202) acceptedTotal++;
        if (t0 < measureFrom) continue;
        if (code === 202) httpOk++;
        else fail(`HTTP ${code}`);
      }
    };
    const smtpLoop = async (n: number) => {
      const listener = smtpListeners[n % smtpListeners.length];
      const transport = nodemailer.createTransport({
        host: listener.host,
        port: listener.port,
        secure: false,
        requireTLS: true,
        tls: { rejectUnauthorized: false },
        auth: { user: `relay-${n}`, pass: targets.key },
        pool: true,
        maxConnections: 1,
        maxMessages: 1000,
      });
      transport.on('error', () => {});
      transports.push(transport);
      for (let i = 0; ; i++) {
        const t0 = performance.now();
        if (t0 >= stopAt) return;
        let ok = false;
        let why = '';
        try {
          const info = await transport.sendMail({
            envelope: { from: 'bench@example.com', to: ['rcpt@example.org'] },
            raw: smtpMessage(`s${n}.${i}`),
          });
          ok = /^250 2\.0\.0 OK queued as m\./.test(String(info.response));
          if (!ok) why = String(info.response);
        } catch (err) {
          why = String((err as { response?: string }).response ?? (err as Error).message);
        }
        if (ok) acceptedTotal++;
        if (t0 < measureFrom) continue;
        if (ok) smtpOk++;
        else fail(why);
      }
    };
    await Promise.all([
      ...Array.from({ length: RELAY_HTTP_CLIENTS }, (_, n) => httpLoop(n)),
      ...Array.from({ length: RELAY_SMTP_SESSIONS }, (_, n) => smtpLoop(n)),
    ]);
    clearTimeout(armTimer);
    clearTimeout(snapTimer);
    await armed;
    await opened;
    const end = await snap();
    const wall = (performance.now() - measureFrom) / 1000;
    const begin = (await marks.begin) ?? end;
    for (const t of transports) t.close();
    agent.destroy();
    // Let the backlog drain, bounded.
    const drainStart = performance.now();
    let sent = end.sent;
    while (sent < acceptedTotal && performance.now() - drainStart < RELAY_DRAIN_BOUND_MS) {
      await sleep(100);
      sent = await targets.countSent();
    }
    const drainSeconds = (performance.now() - drainStart) / 1000;
    await probe?.close();
    return {
      seconds: +wall.toFixed(2),
      http_clients: RELAY_HTTP_CLIENTS,
      smtp_sessions: RELAY_SMTP_SESSIONS,
      message_bytes: MESSAGE_BYTES,
      accepted_http_per_s: Math.round(httpOk / wall),
      accepted_smtp_per_s: Math.round(smtpOk / wall),
      accepted_per_s: Math.round((httpOk + smtpOk) / wall),
      delivered_per_s: Math.round((end.sent - begin.sent) / wall),
      delivered_at_sink_per_s: Math.round((end.atSink - begin.atSink) / wall),
      delivered_at_sink_through_drain: sink.delivered() - begin.atSink,
      backlog_at_start: begin.accepted - begin.sent,
      backlog_at_end: end.accepted - end.sent,
      errors,
      error_samples: errorSamples,
      server_cpu_cores: +((end.serverCpu - begin.serverCpu) / wall).toFixed(2),
      generator_cpu_cores: +((end.genCpu - begin.genCpu) / wall).toFixed(2),
      sink_cpu_cores: +((end.sinkCpu - begin.sinkCpu) / wall).toFixed(2),
      drain_after_load_s: sent >= acceptedTotal ? +drainSeconds.toFixed(2) : NaN,
      delivered_after_load_per_s: Math.round((sent - end.sent) / drainSeconds),
      accepted_total: acceptedTotal,
      sent_total: sent,
      sent_at_start: begin.sent,
    };
  } finally {
    for (const t of transports) t.close();
    agent.destroy();
  }
}

export async function relayThroughputPhase(
  seconds = RELAY_SECONDS,
): Promise<RelayThroughputResult> {
  const sink = await startSink();
  const setup = await setUp(sink.port, 'postern-bench-relay-');
  const server = await start(setup, setup.configOn);
  const probe = posternProbe([server.child.pid!]);
  try {
    const {
      accepted_total: _accepted,
      sent_total: _sent,
      sent_at_start: _sentAtStart,
      ...drive
    } = await driveRelay(
      { nodes: [server], key: setup.key, countSent: async () => countSent(setup.stateDir) },
      sink,
      seconds,
      probe,
    );
    const cost = await probe.cost(drive.delivered_at_sink_through_drain);
    const rss = processMemoryMb(server.child.pid!, 'VmHWM');
    await server.stop();
    return {
      sink: sink.kind,
      ...drive,
      cost,
      server_peak_rss_mb: +rss.toFixed(1),
      stored_message_bytes_avg: averageSize(setup.stateDir),
      final_statuses: countByStatus(setup.stateDir, 'messages'),
    };
  } finally {
    if (server.child.exitCode === null && server.child.signalCode === null) await server.kill();
    await sink.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// A queue of 100,000: accept with delivery off, then let the scheduler work through it
// ---------------------------------------------------------------------------------------------

export interface RelayQueueResult {
  queued: number;
  enqueue_seconds: number;
  enqueue_per_s: number;
  /** Peak RSS of the server that accepted the queue (delivery off). */
  enqueue_peak_rss_mb: number;
  /** The restarted server, delivery on, with the whole queue due. */
  drain_seconds: number;
  drained: number;
  drained_per_s: number;
  remaining: number;
  rss_at_start_mb: number;
  rss_samples_mb: number[];
  drain_peak_rss_mb: number;
  statuses: Record<string, number>;
}

export async function relayQueuePhase(
  queueSize = QUEUE_SIZE,
  drainSeconds = DRAIN_SECONDS,
): Promise<RelayQueueResult> {
  const sink = await startSink();
  const setup = await setUp(sink.port, 'postern-bench-queue-');
  let server: SpawnedPostern | null = null;
  try {
    server = await start(setup, setup.configOff);
    const url = new URL('/v1/send/batch', server.production);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const text = HTTP_TEXT;
    const batches = Math.ceil(queueSize / 100);
    let next = 0;
    let queued = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (;;) {
          const b = next++;
          if (b >= batches) return;
          const n = Math.min(100, queueSize - b * 100);
          const body = Buffer.from(
            JSON.stringify({
              messages: Array.from({ length: n }, (_, i) => ({
                from: 'Bench <bench@example.com>',
                to: 'rcpt@example.org',
                subject: `Queued ${b}.${i}`,
                text,
              })),
            }),
          );
          const answer = await new Promise<{ status: number; text: string }>((resolve) => {
            const req = http.request(
              url,
              {
                method: 'POST',
                agent,
                headers: {
                  authorization: `Bearer ${setup.key}`,
                  'content-type': 'application/json',
                  'content-length': String(body.length),
                },
              },
              (res) => {
                const chunks: Buffer[] = [];
                res.on('data', (c: Buffer) => chunks.push(c));
                res.on('end', () =>
                  resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
                );
              },
            );
            req.on('error', (err) => resolve({ status: 0, text: err.message }));
            req.end(body);
          });
          if (answer.status !== 207)
            throw new Error(`batch ${b}: ${answer.status} ${answer.text.slice(0, 200)}`);
          queued += (JSON.parse(answer.text) as { data: { status?: string }[] }).data.filter(
            (d) => d.status === 'queued',
          ).length;
        }
      }),
    );
    agent.destroy();
    const enqueueSeconds = (performance.now() - t0) / 1000;
    const enqueueRss = processMemoryMb(server.child.pid!, 'VmHWM');
    await server.stop();

    server = await start(setup, setup.configOn);
    const pid = server.child.pid!;
    const rssAtStart = processMemoryMb(pid, 'VmRSS');
    const samples: number[] = [];
    const d0 = performance.now();
    let sent = 0;
    let lastSample = 0;
    while (performance.now() - d0 < drainSeconds * 1000) {
      await sleep(250);
      const rss = processMemoryMb(pid, 'VmRSS');
      if (performance.now() - lastSample >= 1000) {
        samples.push(+rss.toFixed(1));
        lastSample = performance.now();
      }
      sent = countSent(setup.stateDir);
      if (sent >= queued) break;
    }
    const drainWall = (performance.now() - d0) / 1000;
    const peak = processMemoryMb(pid, 'VmHWM');
    await server.stop();
    const statuses = countByStatus(setup.stateDir, 'messages');
    sent = statuses.sent ?? 0;
    return {
      queued,
      enqueue_seconds: +enqueueSeconds.toFixed(1),
      enqueue_per_s: Math.round(queued / enqueueSeconds),
      enqueue_peak_rss_mb: +enqueueRss.toFixed(1),
      drain_seconds: +drainWall.toFixed(1),
      drained: sent,
      drained_per_s: Math.round(sent / drainWall),
      remaining: queued - sent,
      rss_at_start_mb: +rssAtStart.toFixed(1),
      rss_samples_mb: samples,
      drain_peak_rss_mb: +peak.toFixed(1),
      statuses,
    };
  } finally {
    if (server && server.child.exitCode === null && server.child.signalCode === null)
      await server.kill();
    await sink.stop();
  }
}

/** Human-readable lines in the style of bench/run.ts. */
export function relayLines(t: RelayThroughputResult, q: RelayQueueResult): string[] {
  return [
    `relay end to end (2 KB, stored ${t.stored_message_bytes_avg} B avg, ${t.http_clients} HTTP clients + ${t.smtp_sessions} SMTP sessions, delivery to ${t.sink}, ${t.seconds}s): ` +
      `${t.delivered_per_s} delivered messages/s (target 1,000) while accepting ${t.accepted_per_s}/s (HTTP ${t.accepted_http_per_s}, SMTP ${t.accepted_smtp_per_s}), errors ${t.errors}; ` +
      `backlog ${t.backlog_at_start} → ${t.backlog_at_end}, then ${t.delivered_after_load_per_s} delivered/s without load (${Number.isNaN(t.drain_after_load_s) ? 'not drained within 30 s' : `drained in ${t.drain_after_load_s}s`}); ` +
      `server peak RSS ${t.server_peak_rss_mb} MiB, CPU ${t.server_cpu_cores} cores (generator ${t.generator_cpu_cores}, sink ${t.sink_cpu_cores})`,
    `relay queue of ${q.queued} (accepted in batches of 100 at ${q.enqueue_per_s}/s in ${q.enqueue_seconds}s, peak RSS ${q.enqueue_peak_rss_mb} MiB): ` +
      `restarted with delivery on, ${q.drained} delivered in ${q.drain_seconds}s (${q.drained_per_s}/s), ${q.remaining} left; ` +
      `server RSS ${q.rss_at_start_mb} MiB at start, peak ${q.drain_peak_rss_mb} MiB while working through the queue (target: under 256 MiB)`,
    ...(t.error_samples.length > 0
      ? [`relay errors (first ${t.error_samples.length}): ${t.error_samples.join(' | ')}`]
      : []),
  ];
}
