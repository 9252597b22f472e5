/**
 * Worker-thread entry: the index's only writer for acceptances. It drains every batch that
 * arrived while it was busy into one group: publish the group's spool files (renames, then
 * one filesystem flush: spool/publish.ts), then one BEGIN IMMEDIATE … COMMIT
 * with synchronous=FULL. Those flushes block this thread, never the event loop that serves
 * requests. (A separate publisher thread overlapping the two measured slower: the flushes
 * queue behind each other in the filesystem journal anyway.)
 */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../log.js';
import { publishSpoolFiles, type PendingSpoolFile } from '../spool/publish.js';
import { loadSyncFilesystem, type SpoolSync } from '../spool/syncFilesystem.js';
import { recordAcceptance, type AcceptanceOutcome, type AcceptanceRecord } from './acceptance.js';
import { openDatabase } from './db.js';
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
const queue: CommitUnit[] = [];
let scheduled = false;

function flush(): void {
  scheduled = false;
  while (queue.length > 0) {
    const batch = queue.splice(0, MAX_BATCH);
    parentPort!.postMessage(commit(batch));
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

parentPort!.on('message', (units: CommitUnit[]) => {
  queue.push(...units);
  if (!scheduled) {
    scheduled = true;
    setImmediate(flush);
  }
});
