/** A bulk action's candidate reads can touch ten thousand rows with a cold page cache: on the event loop they would stall both doors. */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../log.js';
import { nameThisThread, THREAD_NAMES } from '../platform/threadName.js';
import { lowerThreadPriority } from '../platform/threadPriority.js';
import { openDatabase } from '../store/db.js';
import { sqliteQueries } from '../store/queries.js';
import { bulkCandidates } from './bulk.js';
import type { BulkReaderReply, BulkReaderRequest } from './bulkReader.js';
import { OperatorError } from './errors.js';

/** Below the doors' threads, above SCHED_IDLE: a bulk action must still finish while the machine is busy. */
const READER_NICE = 10;

nameThisThread(THREAD_NAMES.bulkReader);

const store = sqliteQueries(
  openDatabase((workerData as { stateDir: string }).stateDir, silentLogger(), { migrate: false }),
);
lowerThreadPriority(READER_NICE);

async function answer(r: BulkReaderRequest): Promise<BulkReaderReply> {
  try {
    return {
      seq: r.seq,
      ok: true,
      result: await bulkCandidates(store, r.action, r.target, r.scope, r.now),
      refusal: null,
    };
  } catch (err) {
    if (err instanceof OperatorError)
      return {
        seq: r.seq,
        ok: true,
        result: null,
        refusal: { code: err.code, message: err.message, field: err.field, reason: err.reason },
      };
    return { seq: r.seq, ok: false, error: (err as Error).message };
  }
}

parentPort!.on('message', (requests: BulkReaderRequest[]) => {
  void Promise.all(requests.map(answer)).then((replies) => parentPort!.postMessage(replies));
});
