import type { Clock } from '../clock.js';
import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import type { Logger } from '../log.js';
import type { Spool } from '../spool/spool.js';

/** Short enough that the doors' commits never wait long for the writer. */
const CHUNK = 500;

/** Rows first, then files; chunks yield to the event loop, so a large backlog never stalls the doors. */
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

  sweep(): Promise<number> {
    this.running ??= this.run().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async run(): Promise<number> {
    let removed = 0;
    try {
      while (!this.stopped) {
        const { result } = await this.bookkeeping.write('retention', {
          now: this.clock.now(),
          defaultRetentionDays: this.defaultRetentionDays,
          limit: CHUNK,
        });
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
