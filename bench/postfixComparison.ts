/**
 * Postern beside Postfix in one run (`BENCH_ONLY=postfix`, and part of the full `npm run bench`):
 * the same load generator (bench/smtpClient.ts: 20 sessions, 2 KB messages, STARTTLS + AUTH
 * PLAIN, MAIL/RCPT/DATA pipelined), the same certificate, the same sink, the same filesystem,
 * each Postern phase followed at once by its Postfix phase, so the ratio is measured on the
 * machine as it was in that minute.
 *
 * - SMTP ingest: Postern's smtpIngestPhase (delivery off) against a Postfix instance whose
 *   delivery is held too: by default its queue manager is not started, so each message ends as
 *   a queue file in `incoming`, fsync'd before the 250, which is all Postern's phase does (its
 *   index row and spool file, flushed before the 250). `in_flow_delay` is 0 then (with no
 *   queue manager to hand out tokens, each message would wait the full second).
 *   `BENCH_POSTFIX_INGEST=defer` holds it with `defer_transports = smtp` instead (more work for
 *   Postfix: each message is also moved to the deferred queue with a defer log), `deliver`
 *   measures it while it delivers to the sink. Two pairs, merged per side.
 * - Relay end to end: Postern's relayThroughputPhase (accepting over HTTP and SMTP while
 *   delivering to the sink) against Postfix accepting over SMTP from the same generator while
 *   delivering to a sink of the same kind: delivered/s as the sink counts them, on both sides.
 * - The same two with a competing writer on the same filesystem (diskCompetitor.ts), started
 *   before each phase and stopped (its dirty data flushed) after it, for Postern and Postfix
 *   alike. `BENCH_COMPETITOR=0` leaves these rows out.
 *
 * CPU: Postern's is its server process (every thread); Postfix's is the sum over all processes
 * of the instance (master, smtpd, cleanup, qmgr, smtp, trivial-rewrite, tlsmgr, anvil,
 * postlogd, …, with the CPU of daemons that exited meanwhile, which their master reaps). The
 * generator and the sink are counted apart, the same for both.
 */
import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { benchCertificate, cpuSeconds, machine, percentile, sleep } from './benchServer.js';
import { startDiskCompetitor } from './diskCompetitor.js';
import {
  INGEST_HOLD,
  INGEST_HOLD_TEXT,
  type IngestHold,
  PostfixInstance,
  postfixUnavailable,
} from './postfix.js';
import {
  RELAY_DRAIN_BOUND_MS,
  RELAY_SECONDS,
  RELAY_WARMUP_MS,
  type RelayThroughputResult,
  relayThroughputPhase,
  startSink,
} from './relay.js';
import { groupProbe, type PostfixCost } from './serverCost.js';
import { type SmtpIngestResult, smtpIngestPhase } from './smtp.js';
import { runSmtpLoad, SMTP_SESSIONS, type SmtpLoadResult } from './smtpClient.js';

export const COMPETITOR = process.env.BENCH_COMPETITOR !== '0';
/** Postfix's reply to the final dot once the queue file is safe. */
const POSTFIX_QUEUED = /^250 2\.0\.0 Ok: queued as [0-9A-Za-z]+$/;

export interface PostfixIngestResult extends SmtpLoadResult {
  hold: IngestHold;
  /** Queue files the instance holds after the phase; at least `acknowledged_total` while delivery is held. */
  queue_files: number;
  /** All the instance's processes: CPU per daemon and flushes over the window, per message acknowledged in it. */
  cost: PostfixCost;
}

export interface PostfixRelayResult {
  seconds: number;
  smtp_sessions: number;
  accepted_per_s: number;
  /** What the sink counted in the window. */
  delivered_at_sink_per_s: number;
  backlog_at_start: number;
  backlog_at_end: number;
  errors: number;
  error_samples: string[];
  server_cpu_cores: number;
  generator_cpu_cores: number;
  sink_cpu_cores: number;
  drain_after_load_s: number;
  /** What the sink counted from the window's start until the backlog drained (or the drain's bound): the messages `cost` is per. */
  delivered_at_sink_through_drain: number;
  /** All the instance's processes, from the window's start until the backlog drained, per message the sink counted meanwhile. */
  cost: PostfixCost;
}

interface Pair<P, F> {
  postern: P;
  /** Null when Postfix could not run (postfixUnavailable). */
  postfix: F | null;
}

export interface PostfixComparison {
  machine: string;
  /** Why Postfix did not run; Postern's figures stand alone then. */
  postfix_unavailable: string | null;
  postfix: {
    version: string;
    security: string;
    ingest_hold: IngestHold;
    dir: string;
    same_filesystem: boolean;
  } | null;
  ingest: Pair<SmtpIngestResult, PostfixIngestResult>[];
  relay: Pair<RelayThroughputResult, PostfixRelayResult>;
  competitor: {
    ingest: Pair<SmtpIngestResult, PostfixIngestResult>;
    relay: Pair<RelayThroughputResult, PostfixRelayResult>;
    /** MB/s the writer wrote during each phase: Postern's ingest, Postfix's ingest, Postern's relay, Postfix's relay. */
    writer_mb_per_s: number[];
  } | null;
}

async function postfixIngestPhase(
  postfix: PostfixInstance,
  durationMs: number,
  warmupMs: number,
): Promise<PostfixIngestResult> {
  const sink = INGEST_HOLD === 'deliver' ? await startSink() : null;
  try {
    await postfix.start({ sinkPort: sink?.port ?? 9, delivery: INGEST_HOLD === 'deliver' });
    const probe = groupProbe(() => postfix.processes());
    const load = await runSmtpLoad(
      {
        host: '127.0.0.1',
        port: postfix.port,
        credentials: postfix.credentials,
        accepted: POSTFIX_QUEUED,
        serverCpuSeconds: () => postfix.cpuSeconds(),
      },
      durationMs,
      warmupMs,
      undefined,
      probe,
    );
    await probe.close();
    const cost = await probe.cost(load.accepted);
    const queueFiles = postfix.queuedFiles();
    if (INGEST_HOLD !== 'deliver' && queueFiles < load.acknowledged_total) {
      throw new Error(
        `Postfix holds ${queueFiles} queue files for ${load.acknowledged_total} acknowledged messages`,
      );
    }
    return { ...load, hold: INGEST_HOLD, queue_files: queueFiles, cost };
  } finally {
    postfix.stop();
    await sink?.stop();
  }
}

async function postfixRelayPhase(
  postfix: PostfixInstance,
  seconds = RELAY_SECONDS,
): Promise<PostfixRelayResult> {
  const sink = await startSink();
  try {
    await postfix.start({ sinkPort: sink.port, delivery: true });
    const sinkCpu = () => (sink.pid ? cpuSeconds(sink.pid) : 0);
    let begin = { atSink: 0, acknowledged: 0, sinkCpu: 0 };
    const probe = groupProbe(() => postfix.processes());
    const load = await runSmtpLoad(
      {
        host: '127.0.0.1',
        port: postfix.port,
        credentials: postfix.credentials,
        accepted: POSTFIX_QUEUED,
        serverCpuSeconds: () => postfix.cpuSeconds(),
      },
      seconds * 1000,
      RELAY_WARMUP_MS,
      (acknowledged) => (begin = { atSink: sink.delivered(), acknowledged, sinkCpu: sinkCpu() }),
      probe,
    );
    const end = { atSink: sink.delivered(), sinkCpu: sinkCpu() };
    // As Postern's relay phase measures it: from the warm-up's end to the last reply.
    const wall = load.window_seconds;
    const drainStart = performance.now();
    while (
      sink.delivered() < load.acknowledged_total &&
      performance.now() - drainStart < RELAY_DRAIN_BOUND_MS
    )
      await sleep(100);
    const drained = sink.delivered() >= load.acknowledged_total;
    const drainSeconds = (performance.now() - drainStart) / 1000;
    await probe.close();
    const throughDrain = sink.delivered() - begin.atSink;
    const cost = await probe.cost(throughDrain);
    return {
      seconds: wall,
      smtp_sessions: load.sessions,
      accepted_per_s: Math.round(load.accepted / wall),
      delivered_at_sink_per_s: Math.round((end.atSink - begin.atSink) / wall),
      // The sink can count a message before the generator has read its 250 (Postfix relays within milliseconds): not below 0.
      backlog_at_start: Math.max(0, begin.acknowledged - begin.atSink),
      backlog_at_end: Math.max(0, load.acknowledged_total - end.atSink),
      errors: load.errors,
      error_samples: load.error_samples,
      server_cpu_cores: load.server_cpu,
      generator_cpu_cores: load.generator_cpu,
      sink_cpu_cores: +((end.sinkCpu - begin.sinkCpu) / wall).toFixed(2),
      drain_after_load_s: drained ? +drainSeconds.toFixed(2) : NaN,
      delivered_at_sink_through_drain: throughDrain,
      cost,
    };
  } finally {
    postfix.stop();
    await sink.stop();
  }
}

/** Runs `phase` with the competing writer on the filesystem; the writer's MB/s go to `rates`. */
async function withCompetitor<T>(rates: number[], phase: () => Promise<T>): Promise<T> {
  const writer = startDiskCompetitor();
  try {
    return await phase();
  } finally {
    rates.push(await writer.stop());
  }
}

export async function postfixComparison(
  durationMs: number,
  warmupMs: number,
): Promise<PostfixComparison> {
  const unavailable = postfixUnavailable();
  let postfix: PostfixInstance | null = null;
  let whyNot = unavailable;
  if (!unavailable) {
    try {
      postfix = await PostfixInstance.create(await benchCertificate());
    } catch (err) {
      whyNot = `the Postfix instance did not start: ${(err as Error).message}`;
    }
  }
  const pf = postfix;
  const ingestPair = async () => ({
    postern: await smtpIngestPhase(durationMs, warmupMs),
    postfix: pf ? await postfixIngestPhase(pf, durationMs, warmupMs) : null,
  });
  const relayPair = async () => ({
    postern: await relayThroughputPhase(),
    postfix: pf ? await postfixRelayPhase(pf) : null,
  });
  const ingest = [await ingestPair(), await ingestPair()];
  const relay = await relayPair();
  let competitor: PostfixComparison['competitor'] = null;
  if (COMPETITOR) {
    const rates: number[] = [];
    const underIngest = {
      postern: await withCompetitor(rates, () => smtpIngestPhase(durationMs, warmupMs)),
      postfix: pf
        ? await withCompetitor(rates, () => postfixIngestPhase(pf, durationMs, warmupMs))
        : null,
    };
    const underRelay = {
      postern: await withCompetitor(rates, () => relayThroughputPhase()),
      postfix: pf ? await withCompetitor(rates, () => postfixRelayPhase(pf)) : null,
    };
    competitor = { ingest: underIngest, relay: underRelay, writer_mb_per_s: rates };
  }
  return {
    machine: machine(),
    postfix_unavailable: whyNot,
    postfix: pf
      ? {
          version: pf.version,
          security: pf.security,
          ingest_hold: INGEST_HOLD,
          dir: pf.dir,
          same_filesystem: statSync(pf.dir).dev === statSync(tmpdir()).dev,
        }
      : null,
    ingest,
    relay,
    competitor,
  };
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

const fmt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en') : '–');
const ratio = (a: number, b: number | null) => (b && b > 0 ? `${(a / b).toFixed(2)}×` : '–');

/** Several load results as one: their messages and seconds added, their latencies pooled, CPU averaged. */
function merged(rs: SmtpLoadResult[]): {
  per_s: number;
  p50: number;
  p99: number;
  cpu: number;
  errors: number;
} {
  const latencies = rs.flatMap((r) => r.latenciesMs).sort((a, b) => a - b);
  return {
    per_s: rs.reduce((a, r) => a + r.accepted, 0) / rs.reduce((a, r) => a + r.seconds, 0),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpu: rs.reduce((a, r) => a + r.server_cpu, 0) / rs.length,
    errors: rs.reduce((a, r) => a + r.errors, 0),
  };
}

function ingestCells(ps: SmtpIngestResult[], fs: PostfixIngestResult[]): string[] {
  const p = merged(ps);
  const cells = [
    `${fmt(p.per_s)} msg/s (p50 ${p.p50.toFixed(1)} ms, p99 ${p.p99.toFixed(1)} ms, server ${p.cpu.toFixed(2)} cores, errors ${p.errors})`,
  ];
  if (fs.length === 0) return [...cells, '–', '–'];
  const f = merged(fs);
  return [
    ...cells,
    `${fmt(f.per_s)} msg/s (p50 ${f.p50.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms, all its processes ${f.cpu.toFixed(2)} cores, errors ${f.errors})`,
    ratio(p.per_s, f.per_s),
  ];
}

function relayCells(p: RelayThroughputResult, f: PostfixRelayResult | null): string[] {
  const drained = (s: number) =>
    Number.isNaN(s) ? `not drained in ${RELAY_DRAIN_BOUND_MS / 1000} s` : `drained in ${s} s`;
  const cells = [
    `${fmt(p.delivered_at_sink_per_s)} delivered/s (accepting ${fmt(p.accepted_per_s)}/s over HTTP ${p.http_clients} clients + SMTP ${p.smtp_sessions} sessions; ` +
      `backlog ${p.backlog_at_start} → ${p.backlog_at_end}, ${drained(p.drain_after_load_s)}; server ${p.server_cpu_cores} cores, errors ${p.errors})`,
  ];
  if (!f) return [...cells, '–', '–'];
  return [
    ...cells,
    `${fmt(f.delivered_at_sink_per_s)} delivered/s (accepting ${fmt(f.accepted_per_s)}/s over SMTP ${f.smtp_sessions} sessions; ` +
      `backlog ${f.backlog_at_start} → ${f.backlog_at_end}, ${drained(f.drain_after_load_s)}; all its processes ${f.server_cpu_cores} cores, errors ${f.errors})`,
    ratio(p.delivered_at_sink_per_s, f.delivered_at_sink_per_s),
  ];
}

/** The comparison as a table: one row per figure, Postern | Postfix | ratio, under the machine line. */
export function comparisonLines(c: PostfixComparison, durationMs: number): string[] {
  const seconds = durationMs / 1000;
  const head = c.postfix
    ? `Postfix ${c.postfix.version} beside Postern, one run: a private instance (${c.postfix.dir}, its queue on ${c.postfix.same_filesystem ? 'the same filesystem as' : 'ANOTHER filesystem than'} Postern's state), ` +
      `${c.postfix.security}, the same generator (${SMTP_SESSIONS} sessions, 2 KB), certificate and sink; ` +
      `Postfix's defaults but chroot off, no local delivery, relayhost the sink, a log file; its ingest phase: ${INGEST_HOLD_TEXT[c.postfix.ingest_hold]}`
    : `Postfix comparison skipped: ${c.postfix_unavailable}. Postern's figures alone:`;
  const rows = [
    ['figure', 'Postern', 'Postfix', 'Postern/Postfix'],
    [
      `SMTP ingest, STARTTLS + AUTH (2×${seconds}s)`,
      ...ingestCells(
        c.ingest.map((p) => p.postern),
        c.ingest.flatMap((p) => (p.postfix ? [p.postfix] : [])),
      ),
    ],
    [
      `relay end to end, at the sink (${c.relay.postern.seconds}s)`,
      ...relayCells(c.relay.postern, c.relay.postfix),
    ],
  ];
  if (c.competitor) {
    const mb = c.competitor.writer_mb_per_s.map((r) => fmt(r)).join(', ');
    rows.push(
      [
        `SMTP ingest, a writer on the same filesystem (${seconds}s)`,
        ...ingestCells(
          [c.competitor.ingest.postern],
          c.competitor.ingest.postfix ? [c.competitor.ingest.postfix] : [],
        ),
      ],
      [
        `relay end to end, a writer on the same filesystem`,
        ...relayCells(c.competitor.relay.postern, c.competitor.relay.postfix),
      ],
    );
    rows.push([
      `(the writer: dd of 300 MB files in a loop, no fsync; it wrote ${mb} MB/s during each of these phases, in order)`,
      '',
      '',
      '',
    ]);
  }
  return [`machine: ${c.machine}`, head, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

/** A JSON.stringify replacer that leaves out each message's latency (the lines give percentiles). */
export const withoutLatencies = (key: string, value: unknown): unknown =>
  key === 'latenciesMs' ? undefined : value;
