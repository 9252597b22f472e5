/**
 * What a server spent over a phase's measured window, per message: its CPU (Postern's per
 * thread kind, bench/serverThreads.ts; Postfix's per daemon) and its flushes (fsync, fdatasync
 * and syncfs calls, bench/syscallCounter.ts). One probe per phase:
 *
 *   arm()    attach the flush counters, off (before the window, once the warm-up has started
 *            every thread the load needs: a thread started later is counted with its parent);
 *   open()   the window opens: CPU read, counters on;
 *   close()  the window closes: CPU read, counters off;
 *   cost(n)  the figures per message, `n` being the phase's messages of that window.
 */
import { readFileSync } from 'node:fs';
import { cpuSeconds, procStat } from './benchServer.js';
import {
  type ProcessSample,
  sampleProcess,
  THREAD_KINDS,
  type ThreadCpu,
  type ThreadKind,
  threadCpuBetween,
  threadKind,
  zeroKinds,
} from './serverThreads.js';
import {
  FLUSH_SYSCALLS,
  type SyscallCount,
  SyscallCounter,
  syscallCountingUnavailable,
} from './syscallCounter.js';

/** Flushes over the window. */
export interface FlushCost {
  /** fsync + fdatasync + syncfs calls of the server, per message. */
  per_message: number;
  total: number;
  /** Calls, by call. */
  by_syscall: Record<(typeof FLUSH_SYSCALLS)[number], number>;
  /** Calls by the thread kind (Postern) or daemon (Postfix) that made them. */
  by: Record<string, number>;
  /** The same per message. */
  per_message_by: Record<string, number>;
}

/** Fields both servers' costs share. */
interface CostBase {
  /** The phase's messages of the window: acknowledged (ingest, send), delivered at the sink (relay). */
  messages: number;
  seconds: number;
  /** CPU (utime + stime) of the server over the window, per message, in ms. */
  cpu_ms_per_message: number;
  /** The same as cores busy on average. */
  cpu_cores: number;
  /** Null when no counts could be taken: `flushes_unavailable` says why. */
  flushes: FlushCost | null;
  flushes_unavailable: string | null;
}

export interface PosternCost extends CostBase {
  /** Per thread kind (every kind, 0 when absent), ms per message; they add up to cpu_ms_per_message. */
  threads_ms_per_message: Record<ThreadKind, number>;
  /** Live threads of each kind at the window's end. */
  threads: Record<ThreadKind, number>;
  /** The single thread that spent the most in the window. */
  busiest_thread: { kind: ThreadKind; name: string; ms_per_message: number; cores: number } | null;
  /** Of the event loop's CPU, its garbage-collection pauses (perf_hooks `gc` entries), ms per message; null without the preload. */
  event_loop_gc_ms_per_message: number | null;
}

export interface PostfixCost extends CostBase {
  /**
   * Per daemon (by process name: smtpd, cleanup, master, tlsmgr, …), ms per message; `reaped` is
   * the CPU of daemons that exited during the window (their master's cutime + cstime).
   */
  processes_ms_per_message: Record<string, number>;
}

export interface CostProbe<C> {
  arm(): Promise<void>;
  /** Reads the CPU at once; the promise settles once the counters are on. */
  open(): Promise<void>;
  close(): Promise<void>;
  cost(messages: number): Promise<C>;
}

const round = (v: number, digits = 3) => +v.toFixed(digits);
const perMessage = (seconds: number, messages: number) =>
  round((seconds * 1000) / Math.max(1, messages));

/** The flush counters of a probe: attached on arm, on between open and close. */
class FlushWindow {
  private counter: Promise<SyscallCounter | null> | null = null;
  private enabled: Promise<void> | null = null;
  private disabled: Promise<void> | null = null;
  failure: string | null;

  constructor(private readonly pids: () => number[]) {
    this.failure = syscallCountingUnavailable() || null;
  }

  arm(): Promise<void> {
    if (this.failure) return Promise.resolve();
    this.counter ??= this.attach();
    return this.counter.then(() => undefined);
  }

  /**
   * perf refuses a pid that exited between the listing and its attach ("Problems finding threads
   * of monitor"): Postfix's daemons come and go, so the list is taken again, a few times.
   */
  private async attach(): Promise<SyscallCounter | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await SyscallCounter.attach(this.pids(), FLUSH_SYSCALLS);
      } catch (err) {
        const message = (err as Error).message;
        if (attempt < 5 && /Problems finding threads/.test(message)) continue;
        this.failure = message.split('\n')[0];
        return null;
      }
    }
  }

  open(): Promise<void> {
    if (this.failure) return Promise.resolve();
    this.enabled = this.arm()
      .then(() => this.counter)
      .then((c) => c?.enable())
      .catch((err: Error) => {
        this.failure = err.message;
      });
    return this.enabled;
  }

  close(): Promise<void> {
    if (this.failure || !this.enabled) return Promise.resolve();
    this.disabled = this.enabled
      .then(() => this.counter)
      .then((c) => c?.disable())
      .catch((err: Error) => {
        this.failure = err.message;
      });
    return this.disabled;
  }

  async counts(): Promise<SyscallCount[] | null> {
    await this.disabled;
    const counter = await this.counter;
    if (!counter) return null;
    try {
      const counts = await counter.finish();
      return this.failure ? null : counts;
    } catch (err) {
      this.failure = (err as Error).message;
      return null;
    }
  }
}

function flushCost(
  counts: SyscallCount[],
  messages: number,
  groupOf: (c: SyscallCount) => string,
  groups: readonly string[],
): FlushCost {
  const bySyscall = Object.fromEntries(
    FLUSH_SYSCALLS.map((s) => [s, 0]),
  ) as FlushCost['by_syscall'];
  const byGroup: Record<string, number> = Object.fromEntries(groups.map((g) => [g, 0]));
  let total = 0;
  for (const c of counts) {
    bySyscall[c.syscall as keyof FlushCost['by_syscall']] += c.count;
    const group = groupOf(c);
    byGroup[group] = (byGroup[group] ?? 0) + c.count;
    total += c.count;
  }
  const n = Math.max(1, messages);
  return {
    per_message: round(total / n, 4),
    total,
    by_syscall: bySyscall,
    by: byGroup,
    per_message_by: Object.fromEntries(
      Object.entries(byGroup).map(([g, v]) => [g, round(v / n, 4)]),
    ),
  };
}

/**
 * A probe of one or more Postern processes (the nodes of a phase): CPU per thread kind, summed
 * over them, and their flushes.
 */
export function posternProbe(pids: number[]): CostProbe<PosternCost> {
  const flushes = new FlushWindow(() => pids);
  let start: { at: number; samples: (ProcessSample | null)[] } | null = null;
  let end: { at: number; samples: (ProcessSample | null)[] } | null = null;
  const sample = () => ({ at: performance.now(), samples: pids.map((pid) => sampleProcess(pid)) });
  return {
    arm: () => flushes.arm(),
    open() {
      start = sample();
      return flushes.open();
    },
    close() {
      end = sample();
      return flushes.close();
    },
    async cost(messages) {
      const counts = await flushes.counts();
      if (!start || !end) throw new Error('the probe was not opened and closed');
      const seconds = (end.at - start.at) / 1000;
      const spans: ThreadCpu[] = [];
      pids.forEach((_, i) => {
        const [a, b] = [start!.samples[i], end!.samples[i]];
        if (a && b) spans.push(threadCpuBetween(a, b));
      });
      const byKind = zeroKinds();
      const threads = zeroKinds();
      let total = 0;
      let gcMs: number | null = spans.length > 0 ? 0 : null;
      for (const span of spans) {
        total += span.seconds;
        for (const k of THREAD_KINDS) {
          byKind[k] += span.byKind[k];
          threads[k] += span.threadsByKind[k];
        }
        gcMs = gcMs === null || span.gcMs === null ? null : gcMs + span.gcMs;
      }
      const busiest = spans.flatMap((s) => s.threads).sort((a, b) => b.seconds - a.seconds)[0];
      const mains = new Set(pids);
      return {
        messages,
        seconds: round(seconds, 2),
        cpu_ms_per_message: perMessage(total, messages),
        cpu_cores: round(total / seconds, 2),
        threads_ms_per_message: Object.fromEntries(
          THREAD_KINDS.map((k) => [k, perMessage(byKind[k], messages)]),
        ) as Record<ThreadKind, number>,
        threads: threads,
        busiest_thread: busiest
          ? {
              kind: busiest.kind,
              name: busiest.name,
              ms_per_message: perMessage(busiest.seconds, messages),
              cores: round(busiest.seconds / seconds, 2),
            }
          : null,
        event_loop_gc_ms_per_message: gcMs === null ? null : round(gcMs / Math.max(1, messages)),
        flushes: counts
          ? flushCost(
              counts,
              messages,
              (c) => threadKind(c.tid, c.name, mains),
              THREAD_KINDS.filter((k) => k !== 'exited'),
            )
          : null,
        flushes_unavailable: counts ? null : flushes.failure,
      };
    },
  };
}

/** A process of a group: its own CPU, and (the group's master) what it has reaped. */
interface GroupMember {
  pid: number;
  name: string;
  own: number;
  reaped: number;
}

function processName(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

function sampleGroup(pids: number[]): GroupMember[] {
  const members: GroupMember[] = [];
  for (const pid of pids) {
    const fields = procStat(pid);
    if (!fields || fields[0] === 'Z') continue;
    members.push({
      pid,
      name: processName(pid),
      own: cpuSeconds(pid),
      reaped: cpuSeconds(pid, true) - cpuSeconds(pid),
    });
  }
  return members;
}

/**
 * A probe of a group of processes that starts and reaps its own (a Postfix instance:
 * `processes()` lists its live ones, the first being its master): CPU per process name, and
 * their flushes.
 */
export function groupProbe(processes: () => number[]): CostProbe<PostfixCost> {
  const flushes = new FlushWindow(processes);
  let start: { at: number; members: GroupMember[] } | null = null;
  let end: { at: number; members: GroupMember[] } | null = null;
  const sample = () => ({ at: performance.now(), members: sampleGroup(processes()) });
  return {
    arm: () => flushes.arm(),
    open() {
      start = sample();
      return flushes.open();
    },
    close() {
      end = sample();
      return flushes.close();
    },
    async cost(messages) {
      const counts = await flushes.counts();
      if (!start || !end) throw new Error('the probe was not opened and closed');
      const seconds = (end.at - start.at) / 1000;
      const before = new Map(start.members.map((m) => [m.pid, m]));
      const after = new Set(end.members.map((m) => m.pid));
      const byName: Record<string, number> = {};
      let reaped = 0;
      for (const m of end.members) {
        const b = before.get(m.pid);
        byName[m.name] = (byName[m.name] ?? 0) + m.own - (b?.own ?? 0);
        reaped += m.reaped - (b?.reaped ?? 0);
      }
      // A daemon that exited in the window: its whole CPU moved into its master's reaped figure; what it had spent before the window is not the window's.
      for (const m of start.members) if (!after.has(m.pid)) reaped -= m.own + m.reaped;
      byName.reaped = reaped;
      const total = Object.values(byName).reduce((a, v) => a + v, 0);
      const names = Object.keys(byName).sort((a, b) => byName[b] - byName[a]);
      return {
        messages,
        seconds: round(seconds, 2),
        cpu_ms_per_message: perMessage(total, messages),
        cpu_cores: round(total / seconds, 2),
        processes_ms_per_message: Object.fromEntries(
          names.map((n) => [n, perMessage(byName[n], messages)]),
        ),
        flushes: counts ? flushCost(counts, messages, (c) => c.name, []) : null,
        flushes_unavailable: counts ? null : flushes.failure,
      };
    },
  };
}
