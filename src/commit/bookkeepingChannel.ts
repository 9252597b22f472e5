import type { MessagePort } from 'node:worker_threads';
import type { Db } from '../store/db.js';
import { applyDeliveryBookkeeping, type DeliveryBookkeeping, type DeliveryBookkeepingResult } from './deliveryBookkeeping.js';
import { applyWebhookBookkeeping, type WebhookBookkeeping, type WebhookBookkeepingResult } from './webhookBookkeeping.js';

/**
 * The writes the index writer thread runs for others, as plain data, one transaction each:
 * the webhook dispatcher's and the delivery scheduler's. The index keeps one writer, so neither
 * ever holds (or waits for) the write lock the doors' commits need.
 */
export interface BookkeepingWork {
  webhooks: WebhookBookkeeping;
  delivery: DeliveryBookkeeping;
}

export interface BookkeepingResults {
  webhooks: WebhookBookkeepingResult;
  delivery: DeliveryBookkeepingResult;
}

export type BookkeepingKind = keyof BookkeepingWork;

export type BookkeepingRequest = { [K in BookkeepingKind]: { id: number; kind: K; work: BookkeepingWork[K] } }[BookkeepingKind];

export type BookkeepingReply =
  | { id: number; ok: true; result: BookkeepingResults[BookkeepingKind]; acceptanceBusy: boolean }
  | { id: number; ok: false; error: string };

/** What one write came back with: its result, and whether acceptance was committing meanwhile (write less often then). */
export interface BookkeepingOutcome<K extends BookkeepingKind> {
  result: BookkeepingResults[K];
  acceptanceBusy: boolean;
}

/** Runs one request's writes (the caller wraps it in a transaction). */
export function applyBookkeeping(db: Db, request: BookkeepingRequest): BookkeepingResults[BookkeepingKind] {
  return request.kind === 'webhooks' ? applyWebhookBookkeeping(db, request.work) : applyDeliveryBookkeeping(db, request.work);
}

/**
 * A writer's handle on the index writer thread: each `write` is one transaction there,
 * committed with synchronous=NORMAL (no flush of its own; acceptance's next commit carries it).
 */
export class BookkeepingClient {
  private seq = 0;
  private readonly waiting = new Map<number, { resolve: (reply: { result: unknown; acceptanceBusy: boolean }) => void; reject: (e: Error) => void }>();

  constructor(private readonly port: MessagePort) {
    port.on('message', (reply: BookkeepingReply) => {
      const waiter = this.waiting.get(reply.id);
      if (!waiter) return;
      this.waiting.delete(reply.id);
      if (reply.ok) waiter.resolve({ result: reply.result, acceptanceBusy: reply.acceptanceBusy });
      else waiter.reject(new Error(reply.error));
    });
    // The index writer thread ended (shutdown, failure): nothing more will answer.
    port.on('close', () => this.rejectWaiting());
    // The port keeps no event loop alive by itself: the writer's own timers and sockets decide.
    port.unref();
  }

  write<K extends BookkeepingKind>(kind: K, work: BookkeepingWork[K]): Promise<BookkeepingOutcome<K>> {
    const id = ++this.seq;
    return new Promise<BookkeepingOutcome<K>>((resolve, reject) => {
      // The thread answers a request of kind K with that kind's result.
      this.waiting.set(id, { resolve: resolve as (reply: { result: unknown; acceptanceBusy: boolean }) => void, reject });
      // While a reply is awaited, the port must keep the thread alive.
      this.port.ref();
      this.port.postMessage({ id, kind, work } as BookkeepingRequest);
    }).finally(() => {
      if (this.waiting.size === 0) this.port.unref();
    });
  }

  close(): void {
    this.rejectWaiting();
    this.port.close();
  }

  private rejectWaiting(): void {
    for (const waiter of this.waiting.values()) waiter.reject(new Error('index writer channel closed'));
    this.waiting.clear();
  }
}
