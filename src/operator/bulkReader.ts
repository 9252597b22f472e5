import { Worker } from 'node:worker_threads';
import type { MessageAction } from '../store/messageActions.js';
import type { BulkCandidates, BulkTarget } from './bulk.js';
import { OperatorError } from './errors.js';

export interface BulkReaderRequest {
  id: number;
  action: MessageAction;
  target: BulkTarget;
  scope: readonly string[] | null;
  now: number;
}

export type BulkReaderReply =
  | { id: number; ok: true; result: BulkCandidates }
  | { id: number; ok: false; error: string; refusal: { code: OperatorError['code']; field?: string; reason: string } | null };

/** Where the server reads a bulk action's candidates; absent (the CLI): on the operator's own connection. */
export interface OperatorReader {
  bulkCandidates(action: MessageAction, target: BulkTarget, scope: readonly string[] | null, now: number): Promise<BulkCandidates>;
}

/**
 * The event loop's side of the bulk reader thread (operator/bulkReaderThread.ts), started at the
 * first bulk action (most servers never run one) and kept for the next.
 */
export class BulkReader implements OperatorReader {
  private worker: Worker | null = null;
  private seq = 0;
  private readonly waiting = new Map<number, { resolve: (v: BulkCandidates) => void; reject: (e: Error) => void }>();

  constructor(private readonly stateDir: string) {}

  bulkCandidates(action: MessageAction, target: BulkTarget, scope: readonly string[] | null, now: number): Promise<BulkCandidates> {
    const worker = this.start();
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ id, action, target, scope, now } satisfies BulkReaderRequest);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./bulkReaderThread.js', import.meta.url), { workerData: { stateDir: this.stateDir } });
    worker.on('message', (reply: BulkReaderReply) => {
      const waiter = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      if (this.waiting.size === 0) worker.unref();
      if (!waiter) return;
      if (reply.ok) waiter.resolve(reply.result);
      // A refusal (too many messages) is the operator's answer, as it would be on the event loop.
      else waiter.reject(reply.refusal ? new OperatorError(reply.refusal.code, reply.error, reply.refusal.field, reply.refusal.reason) : new Error(reply.error));
    });
    const fail = (err: Error) => {
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
      this.worker = null;
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`bulk reader thread exited with code ${code}`)));
    worker.unref();
    this.worker = worker;
    return worker;
  }

  async close(): Promise<void> {
    await this.worker?.terminate();
    this.worker = null;
  }
}
