/**
 * Where a Postern server's CPU goes, by thread kind: utime + stime of each of its threads from
 * /proc/<pid>/task/<tid>/stat, read at a window's two ends, each thread's kind from its name
 * (/proc/<pid>/task/<tid>/comm). Postern names its worker threads (src/platform/threadName.ts);
 * Node 20 names every other thread "node", so a bench server also loads a preload (below) that
 * names V8's platform threads before anything else starts one, and counts the event loop's
 * garbage-collection pauses.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { THREAD_NAMES } from '../src/platform/threadName.js';

/**
 * The thread kinds of a Postern process, in the order the report gives them:
 * - event_loop: the main thread (both doors' protocols, TLS, policy reads, hand-offs; its share of GC);
 * - spool_writers: `postern-spool` (composing, rewriting and parsing MIME; writing temp files);
 * - index_writer: `postern-index` (commit groups: spool publish, SQLite transaction, flushes);
 * - webhook_dispatcher: `postern-webhook`;
 * - bulk_reader: `postern-bulk` (console bulk actions);
 * - v8_platform: V8's helper threads (parallel and concurrent GC, background compilation),
 *   named `v8-platform` by the bench's preload;
 * - libuv_pool: every other thread (libuv's pool: asynchronous file system calls, crypto, DNS);
 * - exited: threads that ended during the window (the process's CPU minus its live threads').
 */
export const THREAD_KINDS = [
  'event_loop',
  'spool_writers',
  'index_writer',
  'webhook_dispatcher',
  'bulk_reader',
  'v8_platform',
  'libuv_pool',
  'exited',
] as const;
export type ThreadKind = (typeof THREAD_KINDS)[number];

/** How the report names each kind. */
export const THREAD_KIND_TEXT: Record<ThreadKind, string> = {
  event_loop: 'event loop',
  spool_writers: 'spool writers',
  index_writer: 'index writer',
  webhook_dispatcher: 'webhook thread',
  bulk_reader: 'bulk reader',
  v8_platform: 'V8 helpers (GC, compiler)',
  libuv_pool: 'libuv pool',
  exited: 'exited threads',
};

/** The name the preload gives the threads Node's platform starts before any JavaScript runs. */
export const V8_PLATFORM_THREAD_NAME = 'v8-platform';

const KIND_OF_NAME: Record<string, ThreadKind> = {
  [THREAD_NAMES.spoolWriter]: 'spool_writers',
  [THREAD_NAMES.indexWriter]: 'index_writer',
  [THREAD_NAMES.webhookDispatcher]: 'webhook_dispatcher',
  [THREAD_NAMES.bulkReader]: 'bulk_reader',
  [V8_PLATFORM_THREAD_NAME]: 'v8_platform',
};

/** A thread's kind: the main thread (its tid is one of `mainTids`, the processes' pids), else by its name. */
export function threadKind(tid: number, name: string, mainTids: ReadonlySet<number>): ThreadKind {
  if (mainTids.has(tid)) return 'event_loop';
  return KIND_OF_NAME[name] ?? 'libuv_pool';
}

export interface ThreadSample {
  tid: number;
  name: string;
  kind: ThreadKind;
  /** utime + stime so far, in seconds. */
  seconds: number;
}

export interface ProcessSample {
  pid: number;
  /** utime + stime of the whole process (its live threads and those that ended), in seconds. */
  seconds: number;
  threads: ThreadSample[];
  /** The event loop's GC pauses so far (ms), as the preload last wrote them; null without it. */
  gcMs: number | null;
}

/** `/proc/<pid>/…/stat`'s fields after the command name (so `[11]` and `[12]` are utime and stime), or null once it is gone. */
function statFields(file: string): string[] | null {
  try {
    const stat = readFileSync(file, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

const ticks = (fields: string[]) => (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux

/** Where each bench server's preload writes its GC figure (startBenchPostern registers it). */
const gcFiles = new Map<number, string>();

export function registerGcFile(pid: number, file: string): void {
  gcFiles.set(pid, file);
}

function readGcMs(pid: number): number | null {
  const file = gcFiles.get(pid);
  if (!file) return null;
  try {
    const [ms, count] = readFileSync(file, 'utf8').split(' ').map(Number);
    return Number.isFinite(ms) && Number.isFinite(count) ? ms : null;
  } catch {
    return null;
  }
}

/** The process's CPU and each live thread's, or null once it is gone. */
export function sampleProcess(pid: number): ProcessSample | null {
  const whole = statFields(`/proc/${pid}/stat`);
  if (!whole) return null;
  const threads: ThreadSample[] = [];
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  const main = new Set([pid]);
  for (const t of tids) {
    const tid = Number(t);
    const fields = statFields(`/proc/${pid}/task/${t}/stat`);
    if (!fields) continue; // ended meanwhile
    let name = '';
    try {
      name = readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    threads.push({ tid, name, kind: threadKind(tid, name, main), seconds: ticks(fields) });
  }
  return { pid, seconds: ticks(whole), threads, gcMs: readGcMs(pid) };
}

/** Per kind, CPU seconds between two samples of one process; `exited` is what the process spent beyond its live threads. */
export interface ThreadCpu {
  seconds: number;
  byKind: Record<ThreadKind, number>;
  threadsByKind: Record<ThreadKind, number>;
  /** Each thread alive at the window's end, with what it spent in the window. */
  threads: { pid: number; tid: number; name: string; kind: ThreadKind; seconds: number }[];
  gcMs: number | null;
}

export const zeroKinds = (): Record<ThreadKind, number> =>
  Object.fromEntries(THREAD_KINDS.map((k) => [k, 0])) as Record<ThreadKind, number>;

export function threadCpuBetween(start: ProcessSample, end: ProcessSample): ThreadCpu {
  const before = new Map(start.threads.map((t) => [t.tid, t.seconds]));
  const byKind = zeroKinds();
  const threadsByKind = zeroKinds();
  const threads: ThreadCpu['threads'] = [];
  let live = 0;
  for (const t of end.threads) {
    // A thread started in the window spent all it has in it.
    const spent = t.seconds - (before.get(t.tid) ?? 0);
    byKind[t.kind] += spent;
    threadsByKind[t.kind]++;
    live += spent;
    threads.push({ pid: end.pid, tid: t.tid, name: t.name, kind: t.kind, seconds: spent });
  }
  const seconds = end.seconds - start.seconds;
  byKind.exited = seconds - live;
  const gcMs = start.gcMs !== null && end.gcMs !== null ? end.gcMs - start.gcMs : null;
  return { seconds, byKind, threadsByKind, threads, gcMs };
}

// ---------------------------------------------------------------------------------------------
// The preload
// ---------------------------------------------------------------------------------------------

/**
 * Loaded with `--require` (CommonJS: read synchronously, before the ES module loader or anything
 * else has used libuv's pool), on the main thread only: at that moment the process's threads
 * other than the main one are those Node's platform started for V8 (its workers for GC and
 * compilation, its delayed-task thread) and the inspector's signal thread, so they are named
 * `v8-platform`; libuv's pool threads start later and keep "node". Then, with
 * POSTERN_BENCH_GC_FILE, the event loop's GC pauses (perf_hooks' `gc` entries: the main
 * thread's part of each collection) are added up and written there every 100 ms.
 */
const PRELOAD = `'use strict';
const { isMainThread } = require('node:worker_threads');
if (isMainThread && process.platform === 'linux') {
  const fs = require('node:fs');
  for (const tid of fs.readdirSync('/proc/self/task')) {
    if (Number(tid) === process.pid) continue;
    try { fs.writeFileSync('/proc/self/task/' + tid + '/comm', ${JSON.stringify(V8_PLATFORM_THREAD_NAME)}); } catch {}
  }
  const file = process.env.POSTERN_BENCH_GC_FILE;
  if (file) {
    const { PerformanceObserver } = require('node:perf_hooks');
    let ms = 0;
    let count = 0;
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) { ms += entry.duration; count++; }
    }).observe({ entryTypes: ['gc'] });
    // Written aside and renamed over the figure, so a reader never sees a half-written file.
    setInterval(() => {
      try { fs.writeFileSync(file + '.next', ms.toFixed(3) + ' ' + count); fs.renameSync(file + '.next', file); } catch {}
    }, 100).unref();
  }
}
`;

let preloadPath: string | null = null;

/** The preload's file (written once per bench process, removed when it exits). */
function preloadFile(): string {
  if (preloadPath) return preloadPath;
  const dir = mkdtempSync(path.join(tmpdir(), 'postern-bench-preload-'));
  preloadPath = path.join(dir, 'threadNames.cjs');
  writeFileSync(preloadPath, PRELOAD);
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return preloadPath;
}

/** The environment that makes a bench server load the preload, its GC figure going to `gcFile`. */
export function preloadEnv(gcFile: string): Record<string, string> {
  const options = [process.env.NODE_OPTIONS ?? '', `--require ${preloadFile()}`]
    .filter(Boolean)
    .join(' ');
  return { NODE_OPTIONS: options, POSTERN_BENCH_GC_FILE: gcFile };
}
