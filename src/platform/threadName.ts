import { writeFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

/** Each worker thread's Linux `comm` (at most 15 bytes): Node names every thread "node", so they looked alike in top -H and the bench. */
export const THREAD_NAMES = {
  indexWriter: 'postern-index',
  spoolWriter: 'postern-spool',
  webhookDispatcher: 'postern-webhook',
  bulkReader: 'postern-bulk',
} as const;

export type ThreadName = (typeof THREAD_NAMES)[keyof typeof THREAD_NAMES];

/** On the main thread nothing is done: its name is the process's. Best effort elsewhere than Linux. */
export function nameThisThread(name: ThreadName): void {
  if (process.platform !== 'linux' || isMainThread) return;
  try {
    writeFileSync('/proc/thread-self/comm', name);
  } catch {}
}
