import { writeFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

/**
 * The names Postern gives its worker threads (Linux: each thread's `comm`, at most 15 bytes), as
 * `top -H`, `ps -L`, perf and /proc/<pid>/task/<tid>/comm show them. Node 20 names every thread
 * "node": the index writer, a spool writer and V8's helpers looked alike, to an operator and to
 * the bench that reports each thread kind's CPU (bench/serverThreads.ts).
 */
export const THREAD_NAMES = {
  indexWriter: 'postern-index',
  spoolWriter: 'postern-spool',
  webhookDispatcher: 'postern-webhook',
  bulkReader: 'postern-bulk',
} as const;

export type ThreadName = (typeof THREAD_NAMES)[keyof typeof THREAD_NAMES];

/**
 * Names the calling worker thread (a synchronous write runs on the calling thread, so
 * /proc/thread-self is this one). On the main thread nothing is done: its name is the
 * process's, and a module imported there by mistake must not rename it. Best effort: elsewhere
 * than Linux, or without /proc, nothing is done.
 */
export function nameThisThread(name: ThreadName): void {
  if (process.platform !== 'linux' || isMainThread) return;
  try {
    writeFileSync('/proc/thread-self/comm', name);
  } catch {
    // Unnamed: only the thread listings lose.
  }
}
