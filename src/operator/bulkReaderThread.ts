/**
 * Worker-thread entry: finds the candidates of a bulk action (operator/bulk.ts) on a connection
 * of its own. Those reads can touch ten thousand rows, and every commit of the index writer
 * empties the event loop connection's page cache, so on the event loop they would stall both
 * doors for tens of milliseconds; here they only share the CPU, at a lower priority, and come
 * back as a few strings (JSON chunks), not ten thousand objects.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../log.js';
import { lowerThreadPriority } from '../platform/threadPriority.js';
import { openDatabase } from '../store/db.js';
import { bulkCandidates } from './bulk.js';
import type { BulkReaderReply, BulkReaderRequest } from './bulkReader.js';
import { OperatorError } from './errors.js';

/** Below the doors' threads (nice 0), above SCHED_IDLE: a bulk action must still finish while the machine is busy. */
const READER_NICE = 10;

const db = openDatabase((workerData as { stateDir: string }).stateDir, silentLogger(), { migrate: false });
// An operator's bulk action may take a second or two; the doors' requests may not.
lowerThreadPriority(READER_NICE);

parentPort!.on('message', (r: BulkReaderRequest) => {
  let reply: BulkReaderReply;
  try {
    reply = { id: r.id, ok: true, result: bulkCandidates(db, r.action, r.target, r.scope, r.now) };
  } catch (err) {
    const refusal = err instanceof OperatorError ? { code: err.code, field: err.field, reason: err.reason } : null;
    reply = { id: r.id, ok: false, error: (err as Error).message, refusal };
  }
  parentPort!.postMessage(reply);
});
