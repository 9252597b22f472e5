/** Worker thread: MailComposer and mailparser are CPU-heavy, so composing, rewriting and parsing stay off the event loop. */
import { rmSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { composedAsStream, composeMime, composeMimeStream } from '../mime/composeMime.js';
import { type IngestOptions, ingestBufferedMessage, type ParsedMail } from '../mime/ingest.js';
import { type StructureProblem, structureRefusal } from '../mime/structureLimits.js';
import { nameThisThread, THREAD_NAMES } from '../platform/threadName.js';
import { writeTempFileFrom, writeTempFileSync } from '../spool/spool.js';
import type { OutgoingMessage } from './outgoingMessage.js';

/** Handed back whole (`held`) when at most `heldMaxBytes`, else written to `tmpPath` (into `reusePath`, a retired file, if given). */
export type WriteTask =
  | {
      kind: 'compose';
      seq: number;
      id: string;
      message: OutgoingMessage;
      dateMs: number;
      tmpPath: string;
      reusePath?: string;
      heldMaxBytes: number;
    }
  | {
      kind: 'ingest';
      seq: number;
      data: Uint8Array;
      tmpPath: string;
      reusePath?: string;
      heldMaxBytes: number;
      options: IngestOptions;
    }
  | { kind: 'ready'; seq: number };

/** `held` is moved, not copied, to the event loop. `refused`: the sender's fault, nothing written. */
export type WriteResult =
  | {
      seq: number;
      ok: true;
      size: number;
      parsed?: ParsedMail;
      held?: Uint8Array;
      refused?: StructureProblem;
    }
  | { seq: number; ok: false; error: string };

nameThisThread(THREAD_NAMES.spoolWriter);

/** Buffers arrive as plain Uint8Arrays after structured cloning. */
function revive(message: OutgoingMessage): OutgoingMessage {
  return {
    ...message,
    attachments: message.attachments.map((a) => ({
      ...a,
      content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength),
    })),
  };
}

/** A small Buffer is a slice of a shared pool: moving the pool would take every other Buffer in it along. */
function ownedCopy(bytes: Buffer): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes;
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

const REPLY_BATCH_MS = 1;

const queue: WriteTask[] = [];
let running = false;
let results: WriteResult[] = [];
let oldestResultAt = 0;
let flushTimer: NodeJS.Timeout | null = null;

function flushResults(): void {
  if (flushTimer) clearTimeout(flushTimer);
  flushTimer = null;
  if (results.length === 0) return;
  const moved = results.flatMap((r) => (r.ok && r.held ? [r.held.buffer as ArrayBuffer] : []));
  parentPort!.postMessage(results, moved);
  results = [];
}

/** One at a time (run together, every task of a batch finishes as late as the last); results go back in batches. */
async function drain(): Promise<void> {
  running = true;
  while (queue.length > 0) {
    const result = await handle(queue.shift()!);
    if (results.length === 0) {
      oldestResultAt = performance.now();
      flushTimer = setTimeout(flushResults, REPLY_BATCH_MS);
    }
    results.push(result);
    if (queue.length === 0 || performance.now() - oldestResultAt >= REPLY_BATCH_MS) flushResults();
  }
  running = false;
}

async function handle(task: WriteTask): Promise<WriteResult> {
  if (task.kind === 'ready') return { seq: task.seq, ok: true, size: 0 };
  try {
    if (task.kind === 'ingest') {
      const data = Buffer.from(task.data.buffer, task.data.byteOffset, task.data.byteLength);
      let held: Uint8Array | undefined;
      const parsed = await ingestBufferedMessage(data, task.options, (rewritten) => {
        if (rewritten.length <= task.heldMaxBytes) held = ownedCopy(rewritten);
        else writeTempFileSync(task.tmpPath, rewritten, task.reusePath);
      });
      return { seq: task.seq, ok: true, size: parsed.size, parsed, held };
    }
    const message = revive(task.message);
    const date = new Date(task.dateMs);
    if (composedAsStream(message)) {
      const size = await writeTempFileFrom(
        task.tmpPath,
        composeMimeStream(task.id, message, date),
        task.reusePath,
      );
      return { seq: task.seq, ok: true, size };
    }
    const mime = await composeMime(task.id, message, date);
    if (mime.length <= task.heldMaxBytes)
      return { seq: task.seq, ok: true, size: mime.length, held: ownedCopy(mime) };
    writeTempFileSync(task.tmpPath, mime, task.reusePath);
    return { seq: task.seq, ok: true, size: mime.length };
  } catch (err) {
    rmSync(task.tmpPath, { force: true });
    // Refused, not failed: the caller answers 422 / 554, not 500 / 451.
    const refused = structureRefusal(err);
    if (refused) return { seq: task.seq, ok: true, size: 0, refused: refused.problem };
    return { seq: task.seq, ok: false, error: (err as Error).message };
  }
}

parentPort?.on('message', (tasks: WriteTask[]) => {
  queue.push(...tasks);
  if (!running) void drain();
});
