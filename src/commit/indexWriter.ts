import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import type { Logger } from '../log.js';
import type { MetricsSnapshot } from '../platform/metrics.js';
import { ThreadChannel } from '../platform/threadChannel.js';
import { THREAD_NAMES } from '../platform/threadName.js';
import type { LimitSettings } from '../policy/usageLimits.js';
import type { PendingSpoolFile } from '../spool/publish.js';
import type { SpoolSync } from '../spool/syncFilesystem.js';
import type { AcceptanceOutcome, AcceptanceRecord } from './acceptance.js';
import type {
  CommitResult,
  CommitUnit,
  IndexWriterData,
  IndexWriterMessage,
  IndexWriterReply,
  WriterQuestion,
  WriterStatus,
} from './indexWriterThread.js';

/** The event loop's side of the index writer thread: a tick's units travel in one message; each promise settles alone. */
export class IndexWriter {
  private readonly worker: Worker;
  private readonly channel: ThreadChannel<IndexWriterReply>;
  private outbox: CommitUnit[] = [];
  /** Each body owns its ArrayBuffer (heldBody), so it can be moved. */
  private outboxTransfer: ArrayBuffer[] = [];
  private seq = 0;
  private closed = false;

  constructor(
    stateDir: string,
    limits: LimitSettings,
    logger: Logger,
    spoolSync: SpoolSync,
    metrics = true,
  ) {
    this.worker = new Worker(new URL('./indexWriterThread.js', import.meta.url), {
      name: THREAD_NAMES.indexWriter,
      workerData: { stateDir, limits, spoolSync, metrics } satisfies IndexWriterData,
    });
    this.channel = new ThreadChannel(this.worker, { name: 'index writer' });
    this.worker.on('error', (err) => logger.fatal({ err }, 'index writer thread failed'));
    this.worker.on('exit', (code) => {
      if (!this.closed)
        logger.fatal({ code }, 'index writer thread exited; acceptances will fail until restart');
    });
  }

  /** The pipeline pre-checks: its reads are local (AcceptanceCommits.precheck). */
  readonly precheck = true;

  /** Publishes each unit's spool file, then commits its record, in the order given. A body's memory moves to the thread. */
  submitMany(
    units: { file: PendingSpoolFile | null; record: AcceptanceRecord }[],
  ): Promise<AcceptanceOutcome>[] {
    return units.map(({ file, record }) => {
      if (this.closed) return Promise.reject(new Error('index writer closed'));
      const seq = ++this.seq;
      if (this.outbox.length === 0) queueMicrotask(() => this.send());
      this.outbox.push({ seq, file, record });
      if (record.body) this.outboxTransfer.push(record.body.buffer as ArrayBuffer);
      return this.channel
        .expect(seq)
        .then((committed) => (committed as Extract<CommitResult, { ok: true }>).outcome);
    });
  }

  private send(): void {
    const units = this.outbox;
    const transfer = this.outboxTransfer;
    this.outbox = [];
    this.outboxTransfer = [];
    this.channel.post(units satisfies IndexWriterMessage, transfer);
  }

  /** The returned port is the writer's end, transferable to its thread. */
  openBookkeepingPort(): MessagePort {
    const { port1, port2 } = new MessageChannel();
    this.channel.post({ bookkeepingPort: port2 } satisfies IndexWriterMessage, [port2]);
    return port1;
  }

  updateLimits(limits: LimitSettings): void {
    this.flushOutbox();
    this.channel.post({ limits } satisfies IndexWriterMessage);
  }

  /** Units of this tick not posted yet go first: they were submitted under the old limits. */
  private flushOutbox(): void {
    if (this.outbox.length > 0) this.send();
  }

  async metrics(): Promise<MetricsSnapshot> {
    const reply = await this.ask('metrics');
    return 'metrics' in reply ? reply.metrics : [];
  }

  /** null when it does not answer within `timeoutMs`; the question waits behind the group being committed, so it measures latency too. */
  async status(timeoutMs: number): Promise<WriterStatus | null> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>(
      (resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)),
    );
    try {
      const reply = await Promise.race([this.ask('status'), late]);
      return reply && 'status' in reply ? reply.status : null;
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  private ask(question: WriterQuestion['ask']) {
    if (this.closed) return Promise.reject(new Error('index writer closed'));
    // Posted alone, not in an array: an array is a batch of acceptance units to the thread.
    const seq = ++this.seq;
    const reply = this.channel.expect(seq);
    this.channel.post({ seq, ask: question } satisfies IndexWriterMessage);
    return reply;
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.channel.waiting > 0) await new Promise((r) => setTimeout(r, 5));
    await this.worker.terminate();
  }
}
