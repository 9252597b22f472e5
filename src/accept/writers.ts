import { existsSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.js';
import type { IngestOptions, ParsedMail } from '../mime/ingest.js';
import { MessageStructureRefused, type StructureProblem } from '../mime/structureLimits.js';
import { ThreadChannel } from '../platform/threadChannel.js';
import { THREAD_NAMES } from '../platform/threadName.js';
import type { Spool } from '../spool/spool.js';
import type { OutgoingMessage } from './outgoingMessage.js';
import type { WriteResult, WriteTask } from './writerThread.js';

/** Tasks waiting on a thread before the next one is woken for more. */
const SPILL_AT = 4;

type Done = {
  ok: true;
  size: number;
  parsed?: ParsedMail;
  held?: Uint8Array;
  refused?: StructureProblem;
};

interface Waiter {
  resolve: (done: Done) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  channel: ThreadChannel<WriteResult>;
  /** Settles once the thread has loaded its modules and answered (or failed to). */
  loaded: Promise<void>;
  /** Whether it has answered: tasks go only to loaded threads while any is. */
  ready: boolean;
}

/** A message's MIME under its temp name, to be published as `relPath` at its commit. */
export interface SpoolFile {
  relPath: string;
  tmpPath: string;
}

/** A message's MIME written: a spool file, or held in memory for the index to keep (`held`). */
export type SpooledMessage = ({ held: Uint8Array } | SpoolFile) & { size: number };

/** Attachments at least this big own their memory (Buffer's pool serves only small ones). */
const MOVED_ATTACHMENT_BYTES = 64 * 1024;

/**
 * The memory of a message's big attachments, moved to the writer thread instead of copied: a
 * 25 MB attachment is then in memory once, not twice. The message is the thread's from then on
 * (its attachments read empty here).
 */
function attachmentBuffers(message: OutgoingMessage): ArrayBuffer[] {
  const moved = new Set<ArrayBuffer>();
  for (const a of message.attachments) {
    if (a.content.byteLength >= MOVED_ATTACHMENT_BYTES && a.content.buffer instanceof ArrayBuffer)
      moved.add(a.content.buffer);
  }
  return [...moved];
}

/**
 * A small pool of worker threads that compose MIME (HTTP) or rewrite and parse a received
 * message (SMTP) and write it under a temp name. Both are CPU work: on the event loop they
 * would cap the doors. Tasks of one tick travel to a thread in one message, and results
 * come back batched too: a message per task cost the event loop more than the work it moved.
 */
export class SpoolWriters {
  private readonly slots: Slot[] = [];
  private seq = 0;
  private closing = false;
  private outbox: ({ task: WriteTask; transfer: ArrayBuffer[] } & Waiter)[] = [];

  /**
   * One thread starts with the server; the others (up to `maxThreads`) only when the load first
   * spills onto them. Each isolate costs its own heap, and on a server that does little
   * accepting (working through a queue, a quiet night) the second was never given a task.
   */
  /**
   * `heldMaxBytes` (spool.index_body_max_bytes): a message up to this size comes back held in
   * memory for the index to keep instead of being written to a spool file.
   */
  constructor(
    private readonly spool: Spool,
    private readonly maxThreads: number,
    private readonly heldMaxBytes: number,
    private readonly logger: Logger,
  ) {
    this.slots.push(this.spawn());
  }

  /** Threads started so far. */
  get threads(): number {
    return this.slots.length;
  }

  /**
   * Resolves once the first thread has loaded its modules and takes work (start-up waits for it
   * before the listeners open): loading them costs a few hundred ms of CPU, measured up to 1.3 s
   * on a busy 2-core VM, and a node that reported ready before that made its first messages
   * wait for it. Rejects if the thread cannot start.
   */
  ready(): Promise<void> {
    return this.slots[0]!.loaded;
  }

  private spawn(): Slot {
    const worker = new Worker(new URL('./writerThread.js', import.meta.url), {
      name: THREAD_NAMES.spoolWriter,
    });
    const channel = new ThreadChannel<WriteResult>(worker, { name: 'spool writer' });
    const seq = ++this.seq;
    const loaded = channel.expect(seq).then(() => undefined);
    worker.postMessage([{ kind: 'ready', seq } satisfies WriteTask]);
    const slot: Slot = { worker, channel, loaded, ready: false };
    loaded.then(
      () => (slot.ready = true),
      () => undefined,
    );
    worker.on('error', (err) => {
      this.logger.error({ err }, 'spool writer thread failed');
    });
    worker.on('exit', () => {
      if (!this.closing) {
        const index = this.slots.indexOf(slot);
        if (index !== -1) this.slots[index] = this.spawn();
      }
    });
    return slot;
  }

  /**
   * Composes one message and writes it under its temp name, or holds it (heldMaxBytes). Throws
   * MessageStructureRefused when its headers make a header block Postern does not take.
   */
  async write(id: string, message: OutgoingMessage, nowMs: number): Promise<SpooledMessage> {
    const relPath = this.spool.relativePathFor(id, nowMs);
    const tmpPath = this.spool.tempPathFor(relPath);
    const task: WriteTask = {
      kind: 'compose',
      seq: ++this.seq,
      id,
      message,
      dateMs: nowMs,
      tmpPath,
      ...this.target(),
    };
    const { size, held, refused } = await this.submit(task, attachmentBuffers(message));
    if (refused) this.refuse(task, refused);
    this.returnUnused(task, held);
    return held ? { held, size } : { relPath, tmpPath, size };
  }

  /**
   * Rewrites a message received whole, parses it (see ingestBufferedMessage) and holds it
   * (heldMaxBytes) or writes it to the temp file `tmpPath`. A buffer that owns its memory
   * (Buffer.allocUnsafeSlow) is moved to the thread, not copied. Throws MessageStructureRefused
   * when the message passes a structure limit (structureLimits.ts); nothing is kept then.
   */
  async ingest(
    data: Buffer,
    tmpPath: string,
    options: IngestOptions,
  ): Promise<{ parsed: ParsedMail; held?: Uint8Array }> {
    const owned =
      data.byteOffset === 0 && data.byteLength === data.buffer.byteLength
        ? (data.buffer as ArrayBuffer)
        : undefined;
    const task: WriteTask = {
      kind: 'ingest',
      seq: ++this.seq,
      data,
      tmpPath,
      options,
      ...this.target(),
    };
    const { parsed, held, refused } = await this.submit(task, owned ? [owned] : []);
    if (refused) this.refuse(task, refused);
    this.returnUnused(task, held);
    return { parsed: parsed!, held };
  }

  /** A retired file to write into, when the message may need a file at all. */
  private target(): { heldMaxBytes: number; reusePath?: string } {
    return { heldMaxBytes: this.heldMaxBytes, reusePath: this.spool.takeFree() };
  }

  /**
   * A message refused for its structure. Its retired file, if it was not written into (the
   * refusal came first), goes back to the spool: a client sending such messages again and
   * again must not use up the files kept for reuse.
   */
  private refuse(task: { reusePath?: string }, problem: StructureProblem): never {
    if (task.reusePath !== undefined && existsSync(task.reusePath))
      this.spool.returnFree(task.reusePath);
    throw new MessageStructureRefused(problem);
  }

  /** A held message left its retired file unwritten: back to the spool for the next one. */
  private returnUnused(task: { reusePath?: string }, held: Uint8Array | undefined): void {
    if (held && task.reusePath !== undefined) this.spool.returnFree(task.reusePath);
  }

  private submit(task: WriteTask, transfer: ArrayBuffer[]): Promise<Done> {
    return new Promise<Done>((resolve, reject) => {
      if (this.outbox.length === 0) setImmediate(() => this.dispatch());
      this.outbox.push({ task, transfer, resolve, reject });
    });
  }

  /**
   * Gives the tick's tasks to the threads, one message per thread: to the first thread until it
   * has SPILL_AT tasks waiting, and only then to the next (started then, the first time). On a
   * small machine every thread woken competes with the event loop for a core: SMTP ingest ran
   * faster on one thread than spread over two, HTTP sends faster spilling to a second
   * (docs/architecture.md, "Measured figures"). A thread still loading its modules is given
   * nothing while another has loaded: a spill started under a burst would otherwise hold the
   * tasks it was given until it had loaded, later than the loaded thread would have done them.
   */
  private dispatch(): void {
    const queued = this.outbox;
    this.outbox = [];
    const parts = new Map<Slot, typeof queued>();
    for (const entry of queued) {
      let slot = this.openSlots().find((s) => s.channel.waiting < SPILL_AT);
      if (!slot) {
        this.spawnSpare();
        slot = this.openSlots().reduce((a, b) => (b.channel.waiting < a.channel.waiting ? b : a));
      }
      slot.channel.expect(entry.task.seq).then(entry.resolve, entry.reject);
      const part = parts.get(slot);
      if (part) part.push(entry);
      else parts.set(slot, [entry]);
    }
    for (const [slot, part] of parts) {
      slot.worker.postMessage(
        part.map((p) => p.task),
        part.flatMap((p) => p.transfer),
      );
    }
  }

  /** The threads that take tasks: those loaded, or every one while none is (one restarting). */
  private openSlots(): Slot[] {
    const loaded = this.slots.filter((s) => s.ready);
    return loaded.length > 0 ? loaded : this.slots;
  }

  /** A further thread when the running ones are all busy and the limit allows one. */
  private spawnSpare(): void {
    if (this.closing || this.slots.length >= this.maxThreads) return;
    this.slots.push(this.spawn());
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }
}
