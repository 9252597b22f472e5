/**
 * Worker-thread entry: the index's only writer, for acceptances and for the bookkeeping of the
 * webhook dispatcher, the delivery scheduler, provider feedback, housekeeping and the operator
 * layer (over a MessagePort each, commit/bookkeepingChannel.ts).
 * It drains every batch that arrived while it was busy into one group: publish the group's
 * spool files (renames, then one filesystem flush: spool/publish.ts), then one
 * BEGIN IMMEDIATE … COMMIT with synchronous=FULL. Those flushes block this thread, never the event loop that serves
 * requests. (A separate publisher thread overlapping the two measured slower: the flushes
 * queue behind each other in the filesystem journal anyway.)
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { silentLogger } from '../log.js';
import { publishSpoolFiles, type PendingSpoolFile } from '../spool/publish.js';
import { loadSyncFilesystem, type SpoolSync } from '../spool/syncFilesystem.js';
import { recordAcceptance, type AcceptanceOutcome, type AcceptanceRecord } from './acceptance.js';
import { openDatabase, setDurability } from '../store/db.js';
import { applyBookkeeping, committedDurably, type BookkeepingReply, type BookkeepingRequest } from './bookkeepingChannel.js';
import type { LimitSettings } from '../policy/usageLimits.js';

export interface CommitUnit {
  seq: number;
  file: PendingSpoolFile;
  record: AcceptanceRecord;
}

export interface IndexWriterData {
  stateDir: string;
  limits: LimitSettings;
  spoolSync: SpoolSync;
}

export type CommitResult = { seq: number; ok: true; outcome: AcceptanceOutcome } | { seq: number; ok: false; error: string };

const MAX_BATCH = 512;
const { stateDir, limits, spoolSync } = workerData as IndexWriterData;
const syncFilesystem = spoolSync === 'syncfs' ? loadSyncFilesystem() : null;
const db = openDatabase(stateDir, silentLogger(), { migrate: false });
const runUnit = db.transaction((record: AcceptanceRecord) => recordAcceptance(db, record, limits));
const runBookkeeping = db.transaction(applyBookkeeping);
const queue: CommitUnit[] = [];
const bookkeeping: { port: MessagePort; request: BookkeepingRequest }[] = [];
/** Per channel, acceptance units committed since its last write: the dispatcher writes less often while they flow. */
const acceptedSince = new Map<MessagePort, number>();
let scheduled = false;

function schedule(): void {
  if (scheduled) return;
  scheduled = true;
  setImmediate(flush);
}

function flush(): void {
  scheduled = false;
  while (queue.length > 0) {
    const batch = queue.splice(0, MAX_BATCH);
    for (const [port, n] of acceptedSince) acceptedSince.set(port, n + batch.length);
    parentPort!.postMessage(commit(batch));
  }
  // Acceptances first: a bookkeeping write waits for the groups that arrived with it.
  for (const { port, request } of bookkeeping.splice(0)) port.postMessage([writeBookkeeping(port, request)]);
}

/**
 * Bookkeeping writes, one transaction each. Most commit with synchronous=NORMAL: losing one in a
 * power failure only repeats work (at-least-once), and the next acceptance commit (FULL)
 * flushes the WAL with it anyway. Those that must not be lost stay FULL (committedDurably).
 */
function writeBookkeeping(port: MessagePort, request: BookkeepingRequest): BookkeepingReply {
  const acceptanceBusy = (acceptedSince.get(port) ?? 0) > 0;
  acceptedSince.set(port, 0);
  if (!committedDurably(request)) setDurability(db, 'at-least-once');
  try {
    return { seq: request.seq, ok: true, result: runBookkeeping.immediate(db, request), acceptanceBusy };
  } catch (err) {
    return { seq: request.seq, ok: false, error: (err as Error).message };
  } finally {
    setDurability(db, 'full');
  }
}

function commit(units: CommitUnit[]): CommitResult[] {
  const published = publishSpoolFiles(units.map((u) => u.file), syncFilesystem);
  const unpublished: CommitResult[] = [];
  const batch: CommitUnit[] = [];
  units.forEach((unit, i) => {
    const err = published[i];
    if (err) unpublished.push({ seq: unit.seq, ok: false, error: `spool file not made durable: ${err.message}` });
    else batch.push(unit);
  });
  if (batch.length === 0) return unpublished;
  const results: CommitResult[] = [...unpublished];
  try {
    db.transaction(() => {
      for (const unit of batch) {
        // Each unit in its own savepoint: one that fails rolls back alone.
        try {
          results.push({ seq: unit.seq, ok: true, outcome: runUnit(unit.record) });
        } catch (err) {
          results.push({ seq: unit.seq, ok: false, error: (err as Error).message });
        }
      }
    }).immediate();
  } catch (err) {
    return [...unpublished, ...batch.map((u): CommitResult => ({ seq: u.seq, ok: false, error: `commit failed: ${(err as Error).message}` }))];
  }
  return results;
}

/** From the event loop: a batch of acceptance units, or a new bookkeeping channel's port. */
export type IndexWriterMessage = CommitUnit[] | { bookkeepingPort: MessagePort };

parentPort!.on('message', (message: IndexWriterMessage) => {
  if (Array.isArray(message)) {
    queue.push(...message);
    schedule();
    return;
  }
  const port = message.bookkeepingPort;
  acceptedSince.set(port, 0);
  port.on('close', () => acceptedSince.delete(port));
  port.on('message', (requests: BookkeepingRequest[]) => {
    for (const request of requests) bookkeeping.push({ port, request });
    schedule();
  });
});
