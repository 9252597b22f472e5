/**
 * The terms issue 36 is judged by, read from one run's phases (the full `npm run bench`, and
 * `BENCH_ONLY=postfix|send|smtp` for their parts): per message, each server's CPU (Postern's per
 * thread kind, its busiest thread; Postfix's per daemon) and flushes, beside throughput and
 * latency, for SMTP ingest and relay against Postfix (also beside the `dd` writer) and for
 * `POST /v1/send` against the no-op route. docs/benchmarks.md, "Where the CPU and the flushes
 * go", lists every key.
 */
import { percentile } from './benchServer.js';
import type {
  PostfixComparison,
  PostfixIngestResult,
  PostfixRelayResult,
} from './postfixComparison.js';
import type { RelayThroughputResult } from './relay.js';
import type { FlushCost, PosternCost, PostfixCost } from './serverCost.js';
import { THREAD_KIND_TEXT, THREAD_KINDS, type ThreadKind, zeroKinds } from './serverThreads.js';
import type { SmtpIngestResult } from './smtp.js';
import { FLUSH_SYSCALLS } from './syscallCounter.js';

const round = (v: number, digits = 3) => (Number.isFinite(v) ? +v.toFixed(digits) : null);
const ratio = (a: number | null | undefined, b: number | null | undefined) =>
  a !== null && a !== undefined && b ? round(a / b, 3) : null;

/** Several phases' flushes as one (their counts added). */
function mergeFlushes(fs: (FlushCost | null)[], messages: number): FlushCost | null {
  if (fs.length === 0 || fs.some((f) => f === null)) return null;
  const all = fs as FlushCost[];
  const n = Math.max(1, messages);
  const total = all.reduce((a, f) => a + f.total, 0);
  const by_syscall = Object.fromEntries(
    FLUSH_SYSCALLS.map((s) => [s, all.reduce((a, f) => a + f.by_syscall[s], 0)]),
  ) as FlushCost['by_syscall'];
  const groups = [...new Set(all.flatMap((f) => Object.keys(f.by)))];
  const by = Object.fromEntries(
    groups.map((g) => [g, all.reduce((a, f) => a + (f.by[g] ?? 0), 0)]),
  );
  return {
    per_message: round(total / n, 4)!,
    total,
    by_syscall,
    by,
    per_message_by: Object.fromEntries(groups.map((g) => [g, round(by[g] / n, 4)!])),
  };
}

/** Several phases' Postern costs as one: CPU and flushes added up, divided by their messages together. */
export function mergePosternCosts(cs: PosternCost[]): PosternCost {
  if (cs.length === 1) return cs[0];
  const messages = cs.reduce((a, c) => a + c.messages, 0);
  const seconds = cs.reduce((a, c) => a + c.seconds, 0);
  const n = Math.max(1, messages);
  const weighted = (f: (c: PosternCost) => number) =>
    cs.reduce((a, c) => a + f(c) * c.messages, 0) / n;
  const threads = zeroKinds();
  const perKind = zeroKinds();
  for (const k of THREAD_KINDS) {
    perKind[k] = round(weighted((c) => c.threads_ms_per_message[k]))!;
    threads[k] = Math.max(...cs.map((c) => c.threads[k]));
  }
  const cpuMs = weighted((c) => c.cpu_ms_per_message);
  const busiest = cs.every((c) => c.busiest_thread)
    ? {
        kind: cs[0].busiest_thread!.kind,
        name: cs[0].busiest_thread!.name,
        ms_per_message: round(weighted((c) => c.busiest_thread!.ms_per_message))!,
        cores: round(cs.reduce((a, c) => a + c.busiest_thread!.cores * c.seconds, 0) / seconds, 2)!,
      }
    : null;
  return {
    messages,
    seconds: round(seconds, 2)!,
    cpu_ms_per_message: round(cpuMs)!,
    cpu_cores: round(cs.reduce((a, c) => a + c.cpu_cores * c.seconds, 0) / seconds, 2)!,
    threads_ms_per_message: perKind,
    threads,
    busiest_thread: busiest,
    event_loop_gc_ms_per_message: cs.every((c) => c.event_loop_gc_ms_per_message !== null)
      ? round(weighted((c) => c.event_loop_gc_ms_per_message!))
      : null,
    flushes: mergeFlushes(
      cs.map((c) => c.flushes),
      messages,
    ),
    flushes_unavailable: cs.find((c) => c.flushes_unavailable)?.flushes_unavailable ?? null,
  };
}

export function mergePostfixCosts(cs: PostfixCost[]): PostfixCost {
  if (cs.length === 1) return cs[0];
  const messages = cs.reduce((a, c) => a + c.messages, 0);
  const seconds = cs.reduce((a, c) => a + c.seconds, 0);
  const n = Math.max(1, messages);
  const weighted = (f: (c: PostfixCost) => number) =>
    cs.reduce((a, c) => a + f(c) * c.messages, 0) / n;
  const names = [...new Set(cs.flatMap((c) => Object.keys(c.processes_ms_per_message)))];
  const perName = Object.fromEntries(
    names.map((name) => [name, round(weighted((c) => c.processes_ms_per_message[name] ?? 0))!]),
  );
  return {
    messages,
    seconds: round(seconds, 2)!,
    cpu_ms_per_message: round(weighted((c) => c.cpu_ms_per_message))!,
    cpu_cores: round(cs.reduce((a, c) => a + c.cpu_cores * c.seconds, 0) / seconds, 2)!,
    processes_ms_per_message: Object.fromEntries(
      Object.entries(perName).sort((a, b) => b[1] - a[1]),
    ),
    flushes: mergeFlushes(
      cs.map((c) => c.flushes),
      messages,
    ),
    flushes_unavailable: cs.find((c) => c.flushes_unavailable)?.flushes_unavailable ?? null,
  };
}

/** One comparison row's terms (ingest or relay; alone or beside the writer): Postern's, Postfix's, and Postern/Postfix. */
export interface ComparisonTerms {
  /** Acknowledged (ingest) or delivered at the sink (relay) per second in the window. */
  postern_msg_per_s: number;
  postfix_msg_per_s: number | null;
  msg_per_s_ratio: number | null;
  /** Per message: acknowledgement latency (ingest) as the generator timed it; null for relay. */
  postern_p50_ms: number | null;
  postfix_p50_ms: number | null;
  postern_p99_ms: number | null;
  postfix_p99_ms: number | null;
  /** Server CPU per message (relay: per message delivered, from the window's start until the backlog drained). */
  postern_cpu_ms_per_msg: number;
  postfix_cpu_ms_per_msg: number | null;
  cpu_ratio: number | null;
  postern_threads_ms_per_msg: Record<ThreadKind, number>;
  postern_busiest_thread: PosternCost['busiest_thread'];
  postern_event_loop_gc_ms_per_msg: number | null;
  postfix_processes_ms_per_msg: Record<string, number> | null;
  /** fsync + fdatasync + syncfs calls per message; null when they could not be counted (`flushes_unavailable`). */
  postern_flushes_per_msg: number | null;
  postfix_flushes_per_msg: number | null;
  postern_flushes_by_thread_per_msg: Record<string, number> | null;
  postern_flushes_by_syscall: FlushCost['by_syscall'] | null;
  postfix_flushes_by_syscall: FlushCost['by_syscall'] | null;
  flushes_unavailable: string | null;
}

function comparisonTerms(
  p: { per_s: number; p50: number | null; p99: number | null; cost: PosternCost },
  f: { per_s: number; p50: number | null; p99: number | null; cost: PostfixCost } | null,
): ComparisonTerms {
  return {
    postern_msg_per_s: Math.round(p.per_s),
    postfix_msg_per_s: f ? Math.round(f.per_s) : null,
    msg_per_s_ratio: f ? ratio(p.per_s, f.per_s) : null,
    postern_p50_ms: p.p50 === null ? null : round(p.p50, 1),
    postfix_p50_ms: f?.p50 === null || f?.p50 === undefined ? null : round(f.p50, 1),
    postern_p99_ms: p.p99 === null ? null : round(p.p99, 1),
    postfix_p99_ms: f?.p99 === null || f?.p99 === undefined ? null : round(f.p99, 1),
    postern_cpu_ms_per_msg: p.cost.cpu_ms_per_message,
    postfix_cpu_ms_per_msg: f ? f.cost.cpu_ms_per_message : null,
    cpu_ratio: f ? ratio(p.cost.cpu_ms_per_message, f.cost.cpu_ms_per_message) : null,
    postern_threads_ms_per_msg: p.cost.threads_ms_per_message,
    postern_busiest_thread: p.cost.busiest_thread,
    postern_event_loop_gc_ms_per_msg: p.cost.event_loop_gc_ms_per_message,
    postfix_processes_ms_per_msg: f ? f.cost.processes_ms_per_message : null,
    postern_flushes_per_msg: p.cost.flushes?.per_message ?? null,
    postfix_flushes_per_msg: f?.cost.flushes?.per_message ?? null,
    postern_flushes_by_thread_per_msg: p.cost.flushes?.per_message_by ?? null,
    postern_flushes_by_syscall: p.cost.flushes?.by_syscall ?? null,
    postfix_flushes_by_syscall: f?.cost.flushes?.by_syscall ?? null,
    flushes_unavailable:
      [
        p.cost.flushes_unavailable && `Postern: ${p.cost.flushes_unavailable}`,
        f?.cost.flushes_unavailable && `Postfix: ${f.cost.flushes_unavailable}`,
      ]
        .filter(Boolean)
        .join('; ') || null,
  };
}

/** Ingest phases merged per side: messages and seconds added, latencies pooled, costs merged. */
function ingestSide<R extends SmtpIngestResult | PostfixIngestResult>(rs: R[]) {
  const latencies = rs.flatMap((r) => r.latenciesMs).sort((a, b) => a - b);
  return {
    per_s: rs.reduce((a, r) => a + r.accepted, 0) / rs.reduce((a, r) => a + r.seconds, 0),
    p50: latencies.length > 0 ? percentile(latencies, 50) : null,
    p99: latencies.length > 0 ? percentile(latencies, 99) : null,
  };
}

export function ingestTerms(
  pairs: { postern: SmtpIngestResult; postfix: PostfixIngestResult | null }[],
): ComparisonTerms {
  const ps = pairs.map((p) => p.postern);
  const fs = pairs.flatMap((p) => (p.postfix ? [p.postfix] : []));
  return comparisonTerms(
    { ...ingestSide(ps), cost: mergePosternCosts(ps.map((r) => r.cost)) },
    fs.length > 0 ? { ...ingestSide(fs), cost: mergePostfixCosts(fs.map((r) => r.cost)) } : null,
  );
}

export function relayTerms(
  p: RelayThroughputResult,
  f: PostfixRelayResult | null,
): ComparisonTerms {
  return comparisonTerms(
    { per_s: p.delivered_at_sink_per_s, p50: null, p99: null, cost: p.cost },
    f ? { per_s: f.delivered_at_sink_per_s, p50: null, p99: null, cost: f.cost } : null,
  );
}

/** `POST /v1/send` (policy on, the default) beside the no-op route on the same stack. */
export interface SendTerms {
  accepts_per_s: number;
  p50_ms: number;
  p99_ms: number;
  /** Server CPU per durable accept in the window. */
  cpu_ms_per_accept: number;
  threads_ms_per_accept: Record<ThreadKind, number>;
  busiest_thread: PosternCost['busiest_thread'];
  event_loop_gc_ms_per_accept: number | null;
  flushes_per_accept: number | null;
  flushes_by_thread_per_accept: Record<string, number> | null;
  flushes_by_syscall: FlushCost['by_syscall'] | null;
  flushes_unavailable: string | null;
  noop_req_per_s: number;
  noop_p50_ms: number;
  noop_p99_ms: number;
  /** Server CPU per no-op request. */
  noop_cpu_ms_per_req: number;
  /** accepts_per_s / noop_req_per_s. */
  send_to_noop_ratio: number;
}

export function sendTerms(
  send: { per_s: number; p50_ms: number; p99_ms: number; cost: PosternCost },
  noop: { per_s: number; p50_ms: number; p99_ms: number; cost: PosternCost },
): SendTerms {
  return {
    accepts_per_s: send.per_s,
    p50_ms: send.p50_ms,
    p99_ms: send.p99_ms,
    cpu_ms_per_accept: send.cost.cpu_ms_per_message,
    threads_ms_per_accept: send.cost.threads_ms_per_message,
    busiest_thread: send.cost.busiest_thread,
    event_loop_gc_ms_per_accept: send.cost.event_loop_gc_ms_per_message,
    flushes_per_accept: send.cost.flushes?.per_message ?? null,
    flushes_by_thread_per_accept: send.cost.flushes?.per_message_by ?? null,
    flushes_by_syscall: send.cost.flushes?.by_syscall ?? null,
    flushes_unavailable: send.cost.flushes_unavailable,
    noop_req_per_s: noop.per_s,
    noop_p50_ms: noop.p50_ms,
    noop_p99_ms: noop.p99_ms,
    noop_cpu_ms_per_req: noop.cost.cpu_ms_per_message,
    send_to_noop_ratio: ratio(send.per_s, noop.per_s) ?? 0,
  };
}

export interface Terms {
  smtp_ingest: ComparisonTerms | null;
  relay: ComparisonTerms | null;
  smtp_ingest_beside_writer: ComparisonTerms | null;
  relay_beside_writer: ComparisonTerms | null;
  send: SendTerms | null;
}

export function comparisonTermsOf(c: PostfixComparison): Omit<Terms, 'send'> {
  return {
    smtp_ingest: ingestTerms(c.ingest),
    relay: relayTerms(c.relay.postern, c.relay.postfix),
    smtp_ingest_beside_writer: c.competitor ? ingestTerms([c.competitor.ingest]) : null,
    relay_beside_writer: c.competitor
      ? relayTerms(c.competitor.relay.postern, c.competitor.relay.postfix)
      : null,
  };
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

const num = (v: number | null | undefined, digits = 2) =>
  v === null || v === undefined
    ? '–'
    : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const times = (v: number | null) => (v === null ? '' : ` = ${num(v)}×`);
const busiestText = (b: PosternCost['busiest_thread']) =>
  b ? `${THREAD_KIND_TEXT[b.kind]} ${num(b.ms_per_message, 3)} (${num(b.cores)} cores)` : '–';
const flushText = (v: number | null) => (v === null ? '–' : num(v, 3));

/** The terms as tables under one heading: each figure Postern / Postfix (ratio); then Postern's CPU by thread kind. */
export function termsLines(t: Terms): string[] {
  const rows: [string, ComparisonTerms | null][] = [
    ['SMTP ingest', t.smtp_ingest],
    ['relay (per delivered)', t.relay],
    ['SMTP ingest beside dd', t.smtp_ingest_beside_writer],
    ['relay beside dd', t.relay_beside_writer],
  ];
  const present = rows.filter((r): r is [string, ComparisonTerms] => r[1] !== null);
  const lines = ['Where the CPU and the flushes go (per message; Postern / Postfix, ratio):'];
  const header = [
    'phase',
    'msg/s',
    'p50 ms',
    'p99 ms',
    'CPU ms/msg',
    'busiest Postern thread ms/msg',
    'flushes/msg',
  ];
  const body = present.map(([name, c]) => [
    name,
    `${num(c.postern_msg_per_s, 0)} / ${num(c.postfix_msg_per_s, 0)}${times(c.msg_per_s_ratio)}`,
    c.postern_p50_ms === null ? '–' : `${num(c.postern_p50_ms, 1)} / ${num(c.postfix_p50_ms, 1)}`,
    c.postern_p99_ms === null ? '–' : `${num(c.postern_p99_ms, 1)} / ${num(c.postfix_p99_ms, 1)}`,
    `${num(c.postern_cpu_ms_per_msg, 3)} / ${num(c.postfix_cpu_ms_per_msg, 3)}${times(c.cpu_ratio)}`,
    busiestText(c.postern_busiest_thread),
    `${flushText(c.postern_flushes_per_msg)} / ${flushText(c.postfix_flushes_per_msg)}`,
  ]);
  if (t.send) {
    const s = t.send;
    body.push([
      'POST /v1/send',
      `${num(s.accepts_per_s, 0)} (no-op ${num(s.noop_req_per_s, 0)}: ${num(s.send_to_noop_ratio, 3)}×)`,
      `${num(s.p50_ms, 1)} (no-op ${num(s.noop_p50_ms, 1)})`,
      `${num(s.p99_ms, 1)} (no-op ${num(s.noop_p99_ms, 1)})`,
      `${num(s.cpu_ms_per_accept, 3)} (no-op ${num(s.noop_cpu_ms_per_req, 3)} per request)`,
      busiestText(s.busiest_thread),
      flushText(s.flushes_per_accept),
    ]);
  }
  lines.push(...markdown(header, body));
  const kinds = THREAD_KINDS.filter(
    (k) =>
      present.some(([, c]) => c.postern_threads_ms_per_msg[k] !== 0) ||
      (t.send && t.send.threads_ms_per_accept[k] !== 0),
  );
  const threadRows = [
    ...present.map(([name, c]) => [
      name,
      ...kinds.map((k) => num(c.postern_threads_ms_per_msg[k], 3)),
      num(c.postern_event_loop_gc_ms_per_msg, 3),
      num(c.postern_cpu_ms_per_msg, 3),
    ]),
    ...(t.send
      ? [
          [
            'POST /v1/send',
            ...kinds.map((k) => num(t.send!.threads_ms_per_accept[k], 3)),
            num(t.send.event_loop_gc_ms_per_accept, 3),
            num(t.send.cpu_ms_per_accept, 3),
          ],
        ]
      : []),
  ];
  lines.push(
    "Postern's CPU by thread kind, ms per message (the event loop's GC pauses are part of its figure):",
  );
  lines.push(
    ...markdown(
      ['phase', ...kinds.map((k) => THREAD_KIND_TEXT[k]), 'of which event-loop GC', 'total'],
      threadRows,
    ),
  );
  const postfixRows = present.filter(([, c]) => c.postfix_processes_ms_per_msg);
  if (postfixRows.length > 0) {
    lines.push(
      "Postfix's CPU by daemon, ms per message: " +
        postfixRows
          .map(
            ([name, c]) =>
              `${name}: ${Object.entries(c.postfix_processes_ms_per_msg!)
                .filter(([, v]) => Math.abs(v) >= 0.0005)
                .map(([p, v]) => `${p} ${num(v, 3)}`)
                .join(', ')}`,
          )
          .join('; '),
    );
  }
  const flushRows = [
    ...present.map(
      ([name, c]) =>
        [
          name,
          c.postern_flushes_by_thread_per_msg,
          c.postern_flushes_by_syscall,
          c.postfix_flushes_by_syscall,
        ] as const,
    ),
  ];
  const by = (m: Record<string, number> | null) =>
    m
      ? Object.entries(m)
          .filter(([, v]) => v > 0)
          .map(([k, v]) => `${k} ${num(v, 3)}`)
          .join(', ') || 'none'
      : '–';
  lines.push(
    'flushes (perf-counted fsync/fdatasync/syncfs; Postern per message by thread, calls in all): ' +
      [
        ...flushRows.map(
          ([name, threads, pSys, fSys]) =>
            `${name}: Postern ${by(threads)} (calls ${by(pSys)}), Postfix calls ${by(fSys)}`,
        ),
        ...(t.send
          ? [
              `POST /v1/send: ${by(t.send.flushes_by_thread_per_accept)} (calls ${by(t.send.flushes_by_syscall)})`,
            ]
          : []),
      ].join('; '),
  );
  const unavailable = [
    ...new Set(
      [...present.map(([, c]) => c.flushes_unavailable), t.send?.flushes_unavailable].filter(
        (w): w is string => !!w,
      ),
    ),
  ];
  if (unavailable.length > 0)
    lines.push(`flushes not counted (–) where: ${unavailable.join('; ')}`);
  return lines;
}

function markdown(header: string[], body: string[][]): string[] {
  return [header, header.map(() => '---'), ...body].map((r) => `| ${r.join(' | ')} |`);
}
