import type { MessagePort } from 'node:worker_threads';
import { ThreadChannel } from '../platform/threadChannel.js';
import type { Queries } from '../store/queries.js';
import {
  applyDeliveryBookkeeping,
  type DeliveryBookkeeping,
  type DeliveryBookkeepingResult,
} from './deliveryBookkeeping.js';
import {
  applyFeedbackBookkeeping,
  type FeedbackBookkeeping,
  type FeedbackBookkeepingResult,
} from './feedbackBookkeeping.js';
import {
  applyPruneBookkeeping,
  applyRetentionBookkeeping,
  type PruneBookkeeping,
  type PruneBookkeepingResult,
  type RetentionBookkeeping,
  type RetentionBookkeepingResult,
} from './housekeepingBookkeeping.js';
import {
  applyNodeBookkeeping,
  type NodeBookkeeping,
  type NodeBookkeepingResult,
} from './nodeBookkeeping.js';
import {
  applyOperatorBookkeeping,
  type OperatorBookkeeping,
  type OperatorBookkeepingResult,
  operatorWriteIsDurable,
} from './operatorBookkeeping.js';
import {
  applyWebhookBookkeeping,
  type WebhookBookkeeping,
  type WebhookBookkeepingResult,
} from './webhookBookkeeping.js';

/**
 * The writes the index writer thread runs for others, as plain data, one transaction each: the index keeps
 * one writer, so none of them holds the write lock the doors' commits need.
 */
export interface BookkeepingWork {
  webhooks: WebhookBookkeeping;
  delivery: DeliveryBookkeeping;
  feedback: FeedbackBookkeeping;
  prune: PruneBookkeeping;
  retention: RetentionBookkeeping;
  operator: OperatorBookkeeping;
  node: NodeBookkeeping;
}

export interface BookkeepingResults {
  webhooks: WebhookBookkeepingResult;
  delivery: DeliveryBookkeepingResult;
  feedback: FeedbackBookkeepingResult;
  prune: PruneBookkeepingResult;
  retention: RetentionBookkeepingResult;
  operator: OperatorBookkeepingResult;
  node: NodeBookkeepingResult;
}

export type BookkeepingKind = keyof BookkeepingWork;

export type BookkeepingRequest = {
  [K in BookkeepingKind]: { seq: number; kind: K; work: BookkeepingWork[K] };
}[BookkeepingKind];

export type BookkeepingReply =
  | { seq: number; ok: true; result: BookkeepingResults[BookkeepingKind]; acceptanceBusy: boolean }
  | { seq: number; ok: false; error: string };

/** `acceptanceBusy`: acceptance was committing meanwhile (write less often then). */
export interface BookkeepingOutcome<K extends BookkeepingKind> {
  result: BookkeepingResults[K];
  acceptanceBusy: boolean;
}

export function applyBookkeeping(
  q: Queries,
  request: BookkeepingRequest,
): Promise<BookkeepingResults[BookkeepingKind]> {
  switch (request.kind) {
    case 'webhooks':
      return applyWebhookBookkeeping(q, request.work);
    case 'delivery':
      return applyDeliveryBookkeeping(q, request.work);
    case 'feedback':
      return applyFeedbackBookkeeping(q, request.work);
    case 'prune':
      return applyPruneBookkeeping(q, request.work);
    case 'retention':
      return applyRetentionBookkeeping(q, request.work);
    case 'operator':
      return applyOperatorBookkeeping(q, request.work);
    case 'node':
      return applyNodeBookkeeping(q, request.work);
  }
}

/** Flushed before the reply (FULL) when acknowledged outward; the rest only repeat work if lost, so NORMAL. */
export function committedDurably(request: BookkeepingRequest): boolean {
  return (
    request.kind === 'feedback' ||
    request.kind === 'retention' ||
    (request.kind === 'operator' && operatorWriteIsDurable(request.work))
  );
}

/** SQLite: the index writer thread (BookkeepingClient); PostgreSQL: the database itself (DirectBookkeeping). */
export interface Bookkeeping {
  write<K extends BookkeepingKind>(
    kind: K,
    work: BookkeepingWork[K],
  ): Promise<BookkeepingOutcome<K>>;
  /** PostgreSQL: leases have owners; throttles and the nodes up are the cluster's. */
  readonly sharedByNodes: boolean;
  /** The database went away as it committed: keep it, send it again. */
  inDoubt(err: unknown): boolean;
  close(): void;
}

export class BookkeepingClient implements Bookkeeping {
  readonly sharedByNodes = false;
  private seq = 0;
  private readonly channel: ThreadChannel<BookkeepingReply>;

  constructor(port: MessagePort) {
    // The port keeps no event loop alive by itself: the writer's own timers and sockets decide.
    this.channel = new ThreadChannel(port, { name: 'index writer', refWhileWaiting: true });
  }

  write<K extends BookkeepingKind>(
    kind: K,
    work: BookkeepingWork[K],
  ): Promise<BookkeepingOutcome<K>> {
    const [reply] = this.channel.request([{ seq: ++this.seq, kind, work } as BookkeepingRequest]);
    return reply.then(({ result, acceptanceBusy }) => ({
      result: result as BookkeepingResults[K],
      acceptanceBusy,
    }));
  }

  /** The index writer thread answers every write: a refusal is one. */
  inDoubt(): boolean {
    return false;
  }

  close(): void {
    this.channel.close();
  }
}
