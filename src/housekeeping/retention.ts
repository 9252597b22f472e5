import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { Spool } from '../spool/spool.js';

/** Rows per transaction: short enough that the doors' commits never wait long for the writer. */
const CHUNK = 500;

/**
 * Removes finished messages past their project's retention (`retention_days`): index rows
 * first, then their spool files. Each chunk is one transaction of the index writer thread; the
 * files are retired after it committed. Chunks yield to the event loop between them, so a large
 * backlog (the first sweep after an upgrade) never stalls the doors.
 */
export class RetentionSweeper {
  private running: Promise<number> | null = null;
  private stopped = false;

  constructor(
    private readonly bookkeeping: Bookkeeping,
    private readonly spool: Spool,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly defaultRetentionDays: number,
  ) {}

  /** Starts a sweep unless one is under way; resolves with the number of messages removed. */
  sweep(): Promise<number> {
    this.running ??= this.run().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /** Lets a sweep under way finish its chunk, then stops it. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async run(): Promise<number> {
    let removed = 0;
    try {
      while (!this.stopped) {
        const { result } = await this.bookkeeping.write('retention', { now: this.clock.now(), defaultRetentionDays: this.defaultRetentionDays, limit: CHUNK });
        const files = result.spoolFiles;
        // After the commit: a crash in between leaves files without rows, which start-up removes.
        await Promise.all(files.map((f) => this.spool.retire(f)));
        removed += result.removed;
        // Another node is sweeping (PostgreSQL), or nothing more is due.
        if (result.skipped || result.removed < CHUNK) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
    } catch (err) {
      this.logger.error({ err }, 'retention sweep failed; the next one retries');
    }
    if (removed > 0) this.logger.info({ removed }, 'finished messages past retention removed');
    return removed;
  }
}
