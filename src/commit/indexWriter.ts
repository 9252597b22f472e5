import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { Logger } from '../log.js';
import { ThreadChannel } from '../platform/threadChannel.js';
import type { LimitSettings } from '../policy/usageLimits.js';
import type { AcceptanceOutcome, AcceptanceRecord } from './acceptance.js';
import type { PendingSpoolFile } from '../spool/publish.js';
import type { SpoolSync } from '../spool/syncFilesystem.js';
import type { CommitResult, CommitUnit, IndexWriterData, IndexWriterMessage } from './indexWriterThread.js';

/**
 * The event loop's side of the index writer thread. Units submitted in one tick travel in one
 * message; each promise resolves once its unit is committed durably (or rejects alone).
 */
export class IndexWriter {
  private readonly worker: Worker;
  private readonly channel: ThreadChannel<CommitResult>;
  private outbox: CommitUnit[] = [];
  private seq = 0;
  private closed = false;

  constructor(stateDir: string, limits: LimitSettings, logger: Logger, spoolSync: SpoolSync) {
    this.worker = new Worker(new URL('./indexWriterThread.js', import.meta.url), { workerData: { stateDir, limits, spoolSync } satisfies IndexWriterData });
    this.channel = new ThreadChannel(this.worker, { name: 'index writer' });
    this.worker.on('error', (err) => logger.fatal({ err }, 'index writer thread failed'));
    this.worker.on('exit', (code) => {
      if (!this.closed) logger.fatal({ code }, 'index writer thread exited; acceptances will fail until restart');
    });
  }

  /**
   * Publishes each unit's spool file (durable under its final name), then commits its record;
   * each promise resolves when its unit is durable. Units submitted together are committed in
   * the order given.
   */
  submitMany(units: { file: PendingSpoolFile; record: AcceptanceRecord }[]): Promise<AcceptanceOutcome>[] {
    return units.map(({ file, record }) => {
      if (this.closed) return Promise.reject(new Error('index writer closed'));
      const seq = ++this.seq;
      if (this.outbox.length === 0) queueMicrotask(() => this.send());
      this.outbox.push({ seq, file, record });
      return this.channel.expect(seq).then((committed) => committed.outcome);
    });
  }

  private send(): void {
    const units = this.outbox;
    this.outbox = [];
    this.channel.post(units satisfies IndexWriterMessage);
  }

  /**
   * A channel for a bookkeeping writer (the webhook dispatcher, the delivery scheduler:
   * commit/bookkeepingChannel.ts): the returned port is the writer's end (transferable to its
   * thread); the index writer thread runs what arrives.
   */
  openBookkeepingPort(): MessagePort {
    const { port1, port2 } = new MessageChannel();
    this.channel.post({ bookkeepingPort: port2 } satisfies IndexWriterMessage, [port2]);
    return port1;
  }

  /** Waits for every submitted unit, then stops the thread. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.channel.waiting > 0) await new Promise((r) => setTimeout(r, 5));
    await this.worker.terminate();
  }
}
