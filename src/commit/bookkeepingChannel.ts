import type { MessagePort } from 'node:worker_threads';
import { ThreadChannel } from '../platform/threadChannel.js';
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

export type BookkeepingRequest = { [K in BookkeepingKind]: { seq: number; kind: K; work: BookkeepingWork[K] } }[BookkeepingKind];

export type BookkeepingReply =
  | { seq: number; ok: true; result: BookkeepingResults[BookkeepingKind]; acceptanceBusy: boolean }
  | { seq: number; ok: false; error: string };

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
  private readonly channel: ThreadChannel<BookkeepingReply>;

  constructor(port: MessagePort) {
    // The port keeps no event loop alive by itself: the writer's own timers and sockets decide.
    this.channel = new ThreadChannel(port, { name: 'index writer', refWhileWaiting: true });
  }

  write<K extends BookkeepingKind>(kind: K, work: BookkeepingWork[K]): Promise<BookkeepingOutcome<K>> {
    const [reply] = this.channel.request([{ seq: ++this.seq, kind, work } as BookkeepingRequest]);
    // The thread answers a request of kind K with that kind's result.
    return reply.then(({ result, acceptanceBusy }) => ({ result: result as BookkeepingResults[K], acceptanceBusy }));
  }

  close(): void {
    this.channel.close();
  }
}
