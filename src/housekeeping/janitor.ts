import type { Clock } from '../clock.js';
import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import type { Logger } from '../log.js';
import type { Spool } from '../spool/spool.js';
import { RetentionSweeper } from './retention.js';

const HOUR = 3600_000;

export interface JanitorDeps {
  bookkeeping: Bookkeeping;
  spool: Spool;
  clock: Clock;
  logger: Logger;
  /** The default of projects without their own. */
  retentionDays: number;
  sessionIdleSeconds: number;
}

/** Hourly prunes and the retention sweep; its writes go to the index writer thread. */
export class Janitor {
  private timer: NodeJS.Timeout | null = null;
  private readonly retention: RetentionSweeper;

  constructor(private readonly deps: JanitorDeps) {
    this.retention = new RetentionSweeper(
      deps.bookkeeping,
      deps.spool,
      deps.clock,
      deps.logger,
      deps.retentionDays,
    );
  }

  async start(): Promise<void> {
    await this.prune();
    // Not awaited: a first sweep over a large backlog must not hold up the listeners.
    void this.retention.sweep();
    this.timer = setInterval(() => {
      void this.prune();
      void this.retention.sweep();
    }, HOUR);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.retention.stop();
  }

  private async prune(): Promise<void> {
    const { bookkeeping, clock, logger, retentionDays, sessionIdleSeconds } = this.deps;
    try {
      const { result } = await bookkeeping.write('prune', {
        now: clock.now(),
        retentionDays,
        sessionIdleSeconds,
      });
      if (result.skipped) logger.debug('prune skipped: another node is pruning');
      if (result.idempotencyKeys > 0)
        logger.info({ removed: result.idempotencyKeys }, 'expired idempotency keys pruned');
      if (result.receipts > 0)
        logger.info({ removed: result.receipts }, 'old provider feedback receipts pruned');
      if (result.nodes > 0)
        logger.info({ removed: result.nodes }, 'nodes stopped for a week pruned');
    } catch (err) {
      logger.error({ err }, 'prune failed; the next one retries');
    }
  }
}
