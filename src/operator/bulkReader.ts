import { Worker } from 'node:worker_threads';
import type { MessageKey } from '../store/messageActions.js';
import type { MessageFilter, MessageState } from '../store/messageSearch.js';

export type BulkReaderRequest =
  | { id: number; kind: 'matching'; filter: MessageFilter; limit: number }
  | { id: number; kind: 'states'; ids: readonly string[] };

export type BulkReaderReply = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

/** Where the server reads a bulk action's candidates; absent (the CLI): on the operator's own connection. */
export interface OperatorReader {
  matchingMessageKeys(filter: MessageFilter, limit: number): Promise<MessageKey[]>;
  messageStates(ids: readonly string[]): Promise<MessageState[]>;
}

/**
 * The event loop's side of the bulk reader thread (operator/bulkReaderThread.ts), started at the
 * first bulk action (most servers never run one) and kept for the next.
 */
export class BulkReader implements OperatorReader {
  private worker: Worker | null = null;
  private seq = 0;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  constructor(private readonly stateDir: string) {}

  matchingMessageKeys(filter: MessageFilter, limit: number): Promise<MessageKey[]> {
    return this.ask({ kind: 'matching', filter, limit }) as Promise<MessageKey[]>;
  }

  messageStates(ids: readonly string[]): Promise<MessageState[]> {
    return this.ask({ kind: 'states', ids }) as Promise<MessageState[]>;
  }

  private ask(request: { kind: 'matching'; filter: MessageFilter; limit: number } | { kind: 'states'; ids: readonly string[] }): Promise<unknown> {
    const worker = this.start();
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ ...request, id } as BulkReaderRequest);
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
      else waiter.reject(new Error(reply.error));
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
