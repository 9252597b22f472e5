/**
 * Worker-thread entry: the index's only writer, for acceptances and for the bookkeeping of the
 * webhook dispatcher, the delivery scheduler, provider feedback, housekeeping and the operator
 * layer (over a MessagePort each, commit/bookkeepingChannel.ts).
 * It drains every batch that arrived while it was busy into one group: publish the group's
 * spool files, if any (renames, then one filesystem flush: spool/publish.ts), then one
 * BEGIN IMMEDIATE … COMMIT with synchronous=FULL (a savepoint per acceptance), which also holds the bodies of the group's
 * small messages (store/messageBodies.ts): a group of small messages is durable after the one
 * flush of the WAL. Those flushes block this thread, never the event loop that serves
 * requests. (A separate publisher thread overlapping the two measured slower: the flushes
 * queue behind each other in the filesystem journal anyway.)
 */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../log.js';
import {
  countWebhookOutcome,
  type MetricsSnapshot,
  metricsSnapshot,
  observeCommitGroup,
  setMetricsRecording,
} from '../platform/metrics.js';
import { nameThisThread, THREAD_NAMES } from '../platform/threadName.js';
import type { LimitSettings } from '../policy/usageLimits.js';
import { type PendingSpoolFile, publishSpoolFiles } from '../spool/publish.js';
import { loadSyncFilesystem, type SpoolSync } from '../spool/syncFilesystem.js';
import { openDatabase, setDurability } from '../store/db.js';
import { sqliteQueries } from '../store/queries.js';
import { type AcceptanceOutcome, type AcceptanceRecord, recordAcceptance } from './acceptance.js';
import {
  applyBookkeeping,
  type BookkeepingReply,
  type BookkeepingRequest,
  committedDurably,
} from './bookkeepingChannel.js';

export interface CommitUnit {
  seq: number;
  /** null: the body is in `record` (kept in the index). */
  file: PendingSpoolFile | null;
  record: AcceptanceRecord;
}

export interface IndexWriterData {
  stateDir: string;
  limits: LimitSettings;
  spoolSync: SpoolSync;
  /** Whether to record figures for /metrics (metrics.enabled). */
  metrics: boolean;
}

export type CommitResult =
  | { seq: number; ok: true; outcome: AcceptanceOutcome }
  | { seq: number; ok: false; error: string };

/** What the thread says of itself when asked (GET /readyz): the error of its last write, if that write failed. */
export interface WriterStatus {
  lastWriteError: string | null;
}

/** A question from the event loop, answered between groups: this thread's figures (GET /metrics) or its status (GET /readyz). */
export type WriterQuestion = { seq: number; ask: 'metrics' } | { seq: number; ask: 'status' };

export type WriterAnswer =
  | { seq: number; ok: true; metrics: MetricsSnapshot }
  | { seq: number; ok: true; status: WriterStatus };

/** Everything the thread posts to the event loop. */
export type IndexWriterReply = CommitResult | WriterAnswer;

nameThisThread(THREAD_NAMES.indexWriter);

const MAX_BATCH = 512;
const { stateDir, spoolSync, metrics } = workerData as IndexWriterData;
/** Plans and caps; replaced when the config is reloaded (SIGHUP). */
let limits = (workerData as IndexWriterData).limits;
setMetricsRecording(metrics);
const syncFilesystem = spoolSync === 'syncfs' ? loadSyncFilesystem() : null;
const db = openDatabase(stateDir, silentLogger(), { migrate: false });
const store = sqliteQueries(db);
const queue: CommitUnit[] = [];
const bookkeeping: { port: MessagePort; request: BookkeepingRequest }[] = [];
/** Per channel, acceptance units committed since its last write: the dispatcher writes less often while they flow. */
const acceptedSince = new Map<MessagePort, number>();
let scheduled = false;
/** The last write's error (an acceptance group's or a bookkeeping transaction's); null once one succeeds. */
let lastWriteError: string | null = null;

function schedule(): void {
  if (scheduled) return;
  scheduled = true;
  setImmediate(() => void flush());
}

/**
 * Its store calls never wait on other I/O (SQLite answers at once), so a flush still runs to its
 * end in one turn. `scheduled` stays set until then: work that arrives meanwhile joins this
 * loop, never a second flush (one transaction at a time on this connection).
 */
async function flush(): Promise<void> {
  try {
    while (queue.length > 0 || bookkeeping.length > 0) {
      while (queue.length > 0) {
        const batch = queue.splice(0, MAX_BATCH);
        for (const [port, n] of acceptedSince) acceptedSince.set(port, n + batch.length);
        parentPort!.postMessage(await commit(batch));
      }
      // Acceptances first: a bookkeeping write waits for the groups that arrived with it.
      for (const { port, request } of bookkeeping.splice(0))
        port.postMessage([await writeBookkeeping(port, request)]);
    }
  } finally {
    scheduled = false;
  }
}

/**
 * Bookkeeping writes, one transaction each. Most commit with synchronous=NORMAL: losing one in a
 * power failure only repeats work (at-least-once), and the next acceptance commit (FULL)
 * flushes the WAL with it anyway. Those that must not be lost stay FULL (committedDurably).
 */
async function writeBookkeeping(
  port: MessagePort,
  request: BookkeepingRequest,
): Promise<BookkeepingReply> {
  const acceptanceBusy = (acceptedSince.get(port) ?? 0) > 0;
  acceptedSince.set(port, 0);
  if (!committedDurably(request)) setDurability(db, 'at-least-once');
  try {
    const result = await store.transaction((tx) => applyBookkeeping(tx, request));
    const reply: BookkeepingReply = { seq: request.seq, ok: true, result, acceptanceBusy };
    lastWriteError = null;
    if (request.kind === 'webhooks')
      for (const o of request.work.outcomes)
        countWebhookOutcome(o.ok ? 'delivered' : o.nextAttemptAt !== null ? 'retry' : 'failed');
    return reply;
  } catch (err) {
    // An SQLite or filesystem error (it has a code) says the index is not writable; a refusal of the work itself does not.
    if ((err as { code?: unknown }).code !== undefined) lastWriteError = (err as Error).message;
    return { seq: request.seq, ok: false, error: (err as Error).message };
  } finally {
    setDurability(db, 'full');
  }
}

async function commit(units: CommitUnit[]): Promise<CommitResult[]> {
  const started = performance.now();
  const withFiles = units.filter((u) => u.file !== null);
  const published = new Map(
    publishSpoolFiles(
      withFiles.map((u) => u.file!),
      syncFilesystem,
    ).map((err, i) => [withFiles[i], err]),
  );
  const unpublished: CommitResult[] = [];
  const batch: CommitUnit[] = [];
  units.forEach((unit) => {
    const err = published.get(unit);
    if (err)
      unpublished.push({
        seq: unit.seq,
        ok: false,
        error: `spool file not made durable: ${err.message}`,
      });
    else batch.push(unit);
  });
  if (batch.length === 0) {
    lastWriteError = unpublished[0]?.ok === false ? unpublished[0].error : lastWriteError;
    return unpublished;
  }
  const results: CommitResult[] = [...unpublished];
  try {
    await store.transaction(async (tx) => {
      for (const unit of batch) {
        // Each unit in its own savepoint: one that fails rolls back alone.
        try {
          results.push({
            seq: unit.seq,
            ok: true,
            outcome: await tx.transaction((unitTx) =>
              recordAcceptance(unitTx, unit.record, limits),
            ),
          });
        } catch (err) {
          results.push({ seq: unit.seq, ok: false, error: (err as Error).message });
        }
      }
    });
  } catch (err) {
    lastWriteError = `commit failed: ${(err as Error).message}`;
    return [
      ...unpublished,
      ...batch.map(
        (u): CommitResult => ({
          seq: u.seq,
          ok: false,
          error: `commit failed: ${(err as Error).message}`,
        }),
      ),
    ];
  }
  lastWriteError = null;
  observeCommitGroup(units.length, (performance.now() - started) / 1000);
  return results;
}

/** From the event loop: a batch of acceptance units, a new bookkeeping channel's port, a question, or new limits (SIGHUP). */
export type IndexWriterMessage =
  | CommitUnit[]
  | { bookkeepingPort: MessagePort }
  | WriterQuestion
  | { limits: LimitSettings };

function answer(question: WriterQuestion): void {
  if (question.ask === 'status') {
    parentPort!.postMessage([
      { seq: question.seq, ok: true, status: { lastWriteError } } satisfies WriterAnswer,
    ]);
    return;
  }
  void metricsSnapshot().then((snapshot) =>
    parentPort!.postMessage([
      { seq: question.seq, ok: true, metrics: snapshot } satisfies WriterAnswer,
    ]),
  );
}

parentPort!.on('message', (message: IndexWriterMessage) => {
  if (Array.isArray(message)) {
    queue.push(...message);
    schedule();
    return;
  }
  if ('ask' in message) {
    answer(message);
    return;
  }
  if ('limits' in message) {
    // Units that arrive after this message are judged by the new limits.
    limits = message.limits;
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
