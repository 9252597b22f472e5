/**
 * Counts system calls of chosen processes over a window, per thread: `perf stat` on the kernel's
 * syscall tracepoints (syscalls:sys_enter_<name>), attached to the processes with its counters
 * disabled, switched on and off over a control pipe at the window's two ends.
 *
 * Why perf and not strace: a tracepoint counter is a counter incremented in the kernel as the
 * call enters; the traced thread never stops. strace stops the thread twice per traced call
 * (with -p even on every call: its seccomp filter works only on a program it starts), which
 * delays each flush and so changes the commit groups being measured. Nor can the process count
 * them itself: SQLite's flushes happen inside SQLite. Needs root (or CAP_PERFMON) and perf
 * (Debian: linux-perf); otherwise the report says why there are no counts.
 *
 * Threads and processes started after the counters attach are counted (perf's inherit), under
 * the thread that started them.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { onBenchExit } from './benchServer.js';

/** The calls that flush a file or a filesystem to the device. */
export const FLUSH_SYSCALLS = ['fsync', 'fdatasync', 'syncfs'] as const;
export type FlushSyscall = (typeof FLUSH_SYSCALLS)[number];

/** One thread's count of one call over the window. */
export interface SyscallCount {
  /** The thread's name (comm) when perf attached. */
  name: string;
  tid: number;
  syscall: string;
  count: number;
}

const TRACEPOINTS = '/sys/kernel/tracing/events/syscalls';
let why: string | false | undefined;

/** Why no counts can be taken here (`BENCH_SYSCALLS=0`, not root, no perf, no tracepoints), or false when they can. */
export function syscallCountingUnavailable(): string | false {
  if (why !== undefined) return why;
  if (process.env.BENCH_SYSCALLS === '0') why = 'BENCH_SYSCALLS=0';
  else if (process.getuid?.() !== 0)
    why = 'the bench is not root (perf needs it to count syscall tracepoints)';
  else if (spawnSync('perf', ['--version']).error)
    why = 'perf is not installed (Debian: apt-get install linux-perf)';
  else if (
    !existsSync(`${TRACEPOINTS}/sys_enter_fsync`) &&
    !existsSync(`/sys/kernel/debug/tracing/events/syscalls/sys_enter_fsync`)
  )
    why = 'no syscall tracepoints (tracefs not mounted)';
  else why = false;
  return why;
}

const ANSWER_MS = 30_000;

export class SyscallCounter {
  private acks: (() => void)[] = [];
  private exited: Promise<void>;
  private stderr = '';

  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly syscalls: readonly string[],
  ) {
    const ack = child.stdio[4] as Readable;
    let buffered = '';
    ack.on('data', (d: Buffer) => {
      buffered += d.toString();
      for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
        buffered = buffered.slice(nl + 1);
        this.acks.shift()?.();
      }
    });
    child.stderr?.on('data', (d: Buffer) => (this.stderr += d.toString()));
    // Node's extra stdio pipes are socket pairs: perf exiting (finish's SIGINT) with a command
    // unread resets them. What it counted is in its output file; a reset is no error here.
    for (const stream of [child.stdio[3], child.stdio[4], child.stderr])
      stream?.on('error', () => {});
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    void this.exited.then(() => {
      for (const waiting of this.acks.splice(0)) waiting();
    });
  }

  /**
   * Attaches to `pids` (their threads, and what they start from now on) with the counters off;
   * resolves once perf answers on its control pipe, so its counters are in place.
   */
  static async attach(pids: number[], syscalls: readonly string[]): Promise<SyscallCounter> {
    const dir = mkdtempSync(path.join(tmpdir(), 'postern-bench-perf-'));
    const events = syscalls.map((s) => `syscalls:sys_enter_${s}`).join(',');
    // fd 3: commands to perf; fd 4: its acknowledgements. -D -1: counters off until "enable".
    const args = [
      'stat',
      '-e',
      events,
      '--per-thread',
      '-x',
      ',',
      '-o',
      path.join(dir, 'counts'),
      '-D',
      '-1',
      '--control',
      'fd:3,4',
      '-p',
      pids.join(','),
    ];
    const child = spawn('perf', args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
    onBenchExit(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    });
    const counter = new SyscallCounter(child, dir, syscalls);
    await counter.command('disable');
    return counter;
  }

  /** Sends a control command and waits for perf's acknowledgement. */
  private command(what: 'enable' | 'disable'): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null)
      return Promise.reject(new Error(`perf stat exited: ${this.stderr.trim()}`));
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `perf stat did not acknowledge "${what}" in ${ANSWER_MS / 1000} s: ${this.stderr.trim()}`,
            ),
          ),
        ANSWER_MS,
      );
      this.acks.push(() => {
        clearTimeout(timer);
        if (this.child.exitCode !== null || this.child.signalCode !== null)
          reject(new Error(`perf stat exited: ${this.stderr.trim()}`));
        else resolve();
      });
      (this.child.stdio[3] as Writable).write(`${what}\n`);
    });
  }

  enable(): Promise<void> {
    return this.command('enable');
  }

  disable(): Promise<void> {
    return this.command('disable');
  }

  /** Stops perf and reads its counts: one per thread and call (threads never scheduled while counting count 0). */
  async finish(): Promise<SyscallCount[]> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGINT');
    await this.exited;
    try {
      const text = readFileSync(path.join(this.dir, 'counts'), 'utf8');
      return parsePerfStat(text, this.syscalls);
    } catch (err) {
      throw new Error(
        `perf stat wrote no counts (${(err as Error).message}): ${this.stderr.trim()}`,
      );
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

/** `perf stat --per-thread -x ,` output: `<comm>-<tid>,<count or "<not counted>">,,syscalls:sys_enter_<name>,…`. */
export function parsePerfStat(text: string, syscalls: readonly string[]): SyscallCount[] {
  const counts: SyscallCount[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const fields = line.split(',');
    const event = /^syscalls:sys_enter_(\w+)$/.exec(fields[3] ?? '');
    const thread = /^(.*)-(\d+)$/.exec(fields[0] ?? '');
    if (!event || !thread || !syscalls.includes(event[1])) continue;
    const count = /^\d+$/.test(fields[1]) ? Number(fields[1]) : 0;
    counts.push({ name: thread[1], tid: Number(thread[2]), syscall: event[1], count });
  }
  return counts;
}
