import { Worker } from 'node:worker_threads';
import { ThreadChannel } from '../platform/threadChannel.js';
import { THREAD_NAMES } from '../platform/threadName.js';
import type { MessageAction } from '../store/messageActions.js';
import type { BulkCandidates, BulkTarget, OperatorReader } from './bulkTarget.js';
import { OperatorError } from './errors.js';

export interface BulkReaderRequest {
  seq: number;
  action: MessageAction;
  target: BulkTarget;
  scope: readonly string[] | null;
  now: number;
}

/** An operator's refusal (too many messages) crosses as data, to be thrown again as the OperatorError it was. */
export interface BulkRefusal {
  code: OperatorError['code'];
  message: string;
  field?: string;
  reason: string;
}

export type BulkReaderReply =
  | { seq: number; ok: true; result: BulkCandidates | null; refusal: BulkRefusal | null }
  | { seq: number; ok: false; error: string };

/**
 * The event loop's side of the bulk reader thread (operator/bulkReaderThread.ts), started at the
 * first bulk action (most servers never run one) and kept for the next; it holds the process
 * only while a read is awaited.
 */
export class BulkReader implements OperatorReader {
  private thread: { worker: Worker; channel: ThreadChannel<BulkReaderReply> } | null = null;
  private seq = 0;

  constructor(private readonly stateDir: string) {}

  async bulkCandidates(
    action: MessageAction,
    target: BulkTarget,
    scope: readonly string[] | null,
    now: number,
  ): Promise<BulkCandidates> {
    const [reply] = this.start().channel.request<BulkReaderRequest>([
      { seq: ++this.seq, action, target, scope, now },
    ]);
    const { result, refusal } = await reply;
    // A refusal is the operator's answer, as it would be on the event loop.
    if (refusal)
      throw new OperatorError(refusal.code, refusal.message, refusal.field, refusal.reason);
    return result!;
  }

  private start(): { worker: Worker; channel: ThreadChannel<BulkReaderReply> } {
    if (this.thread) return this.thread;
    const worker = new Worker(new URL('./bulkReaderThread.js', import.meta.url), {
      name: THREAD_NAMES.bulkReader,
      workerData: { stateDir: this.stateDir },
    });
    const thread = {
      worker,
      channel: new ThreadChannel<BulkReaderReply>(worker, {
        name: 'bulk reader thread',
        refWhileWaiting: true,
      }),
    };
    // A thread that died is started again by the next action.
    worker.once('exit', () => {
      if (this.thread === thread) this.thread = null;
    });
    this.thread = thread;
    return thread;
  }

  async close(): Promise<void> {
    const thread = this.thread;
    this.thread = null;
    await thread?.worker.terminate();
  }
}
