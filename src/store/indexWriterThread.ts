/**
 * Worker-thread entry: the index's only writer for acceptances. It drains every batch that
 * arrived while it was busy into one transaction (group commit): fsync the spool directories
 * the batch renamed into, then BEGIN IMMEDIATE … COMMIT with synchronous=FULL. The WAL fsync
 * and checkpoints block this thread, never the event loop that serves requests.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../log.js';
import { syncDirectorySync } from '../spool/spool.js';
import { recordAcceptance, type AcceptanceOutcome, type AcceptanceRecord } from './acceptance.js';
import { openDatabase } from './db.js';
import type { LimitSettings } from '../policy/usageLimits.js';

export interface CommitUnit {
  seq: number;
  dirs: string[];
  record: AcceptanceRecord;
}

export type CommitResult = { seq: number; ok: true; outcome: AcceptanceOutcome } | { seq: number; ok: false; error: string };

const MAX_BATCH = 512;
const { stateDir, limits } = workerData as { stateDir: string; limits: LimitSettings };
const db = openDatabase(stateDir, silentLogger(), { migrate: false });
const runUnit = db.transaction((record: AcceptanceRecord) => recordAcceptance(db, record, limits));
const queue: CommitUnit[] = [];
let scheduled = false;

function flush(): void {
  scheduled = false;
  while (queue.length > 0) {
    const batch = queue.splice(0, MAX_BATCH);
    parentPort!.postMessage(commit(batch));
  }
}

function commit(batch: CommitUnit[]): CommitResult[] {
  try {
    for (const dir of new Set(batch.flatMap((u) => u.dirs))) syncDirectorySync(dir);
  } catch (err) {
    return batch.map((u) => ({ seq: u.seq, ok: false, error: `directory fsync failed: ${(err as Error).message}` }));
  }
  const results: CommitResult[] = [];
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
    return batch.map((u) => ({ seq: u.seq, ok: false, error: `commit failed: ${(err as Error).message}` }));
  }
  return results;
}

parentPort!.on('message', (units: CommitUnit[]) => {
  queue.push(...units);
  if (!scheduled) {
    scheduled = true;
    setImmediate(flush);
  }
});
