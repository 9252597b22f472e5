/**
 * Worker-thread entry: reads the candidates of a bulk action on a connection of its own. Those
 * reads can touch ten thousand rows, and every commit of the index writer empties the event
 * loop connection's page cache, so on the event loop they would stall both doors for tens of
 * milliseconds; here they only share the CPU.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../log.js';
import { lowerThreadPriority } from '../platform/threadPriority.js';
import { openDatabase } from '../store/db.js';
import { matchingMessageKeys, messageStates } from '../store/messageSearch.js';
import type { BulkReaderReply, BulkReaderRequest } from './bulkReader.js';

/** Below the doors' threads (nice 0), above SCHED_IDLE: a bulk action must still finish while the machine is busy. */
const READER_NICE = 10;

const db = openDatabase((workerData as { stateDir: string }).stateDir, silentLogger(), { migrate: false });
// An operator's bulk action may take a second or two; the doors' requests may not.
lowerThreadPriority(READER_NICE);

parentPort!.on('message', (request: BulkReaderRequest) => {
  let reply: BulkReaderReply;
  try {
    reply =
      request.kind === 'matching'
        ? { id: request.id, ok: true, result: matchingMessageKeys(db, request.filter, request.limit) }
        : { id: request.id, ok: true, result: messageStates(db, request.ids) };
  } catch (err) {
    reply = { id: request.id, ok: false, error: (err as Error).message };
  }
  parentPort!.postMessage(reply);
});
