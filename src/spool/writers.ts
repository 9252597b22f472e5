import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { OutgoingMessage } from '../accept/outgoingMessage.js';
import type { Logger } from '../log.js';
import type { Spool } from './spool.js';
import type { WriteResult, WriteTask } from './writerThread.js';

interface Slot {
  worker: Worker;
  pending: Map<number, { resolve: (size: number) => void; reject: (err: Error) => void }>;
}

export interface SpooledMessage {
  relPath: string;
  /** The directory whose fsync makes the rename durable (done by the group committer). */
  dir: string;
  size: number;
}

/**
 * A small pool of worker threads that compose MIME and write it to the spool. Composition is
 * CPU work and fsync blocks a thread; on the event loop both would cap the HTTP door.
 */
export class SpoolWriters {
  private readonly slots: Slot[] = [];
  private seq = 0;
  private closing = false;

  constructor(
    private readonly spool: Spool,
    size: number,
    private readonly logger: Logger,
  ) {
    for (let i = 0; i < size; i++) this.slots.push(this.spawn());
  }

  private spawn(): Slot {
    const worker = new Worker(new URL('./writerThread.js', import.meta.url));
    const slot: Slot = { worker, pending: new Map() };
    worker.on('message', (result: WriteResult) => {
      const waiter = slot.pending.get(result.seq);
      if (!waiter) return;
      slot.pending.delete(result.seq);
      if (result.ok) waiter.resolve(result.size);
      else waiter.reject(new Error(result.error));
    });
    worker.on('error', (err) => {
      this.logger.error({ err }, 'spool writer thread failed');
    });
    worker.on('exit', (code) => {
      for (const waiter of slot.pending.values()) waiter.reject(new Error(`spool writer exited with code ${code}`));
      slot.pending.clear();
      if (!this.closing) {
        const index = this.slots.indexOf(slot);
        if (index !== -1) this.slots[index] = this.spawn();
      }
    });
    return slot;
  }

  /** Composes and durably writes one message; resolves once its bytes are on disk. */
  write(id: string, message: OutgoingMessage, nowMs: number): Promise<SpooledMessage> {
    const relPath = this.spool.relativePathFor(id, nowMs);
    const finalPath = this.spool.absolute(relPath);
    const slot = this.slots.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
    const seq = ++this.seq;
    const task: WriteTask = { seq, id, message, dateMs: nowMs, tmpPath: this.spool.tempPathFor(relPath), finalPath, spoolRoot: this.spool.root };
    return new Promise<number>((resolve, reject) => {
      slot.pending.set(seq, { resolve, reject });
      slot.worker.postMessage(task);
    }).then((size) => ({ relPath, dir: path.dirname(finalPath), size }));
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }
}
