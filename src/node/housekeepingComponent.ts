import type { Clock } from '../clock.js';
import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import type { PosternConfig } from '../config/load.js';
import { FeedbackIntake } from '../delivery/feedback.js';
import { Janitor } from '../housekeeping/janitor.js';
import type { Logger } from '../log.js';
import type { Component } from './components.js';
import type { StoreComponent } from './storeComponent.js';

export type HousekeepingSection = Pick<PosternConfig, 'retention_days'> & {
  console: Pick<PosternConfig['console'], 'session_idle_seconds'>;
};

/**
 * The event loop's writes (provider feedback, housekeeping, this node's row): from here on they go
 * over one channel to the index writer thread (on PostgreSQL, to the database); and the janitor,
 * which prunes what has outlived retention_days and idle console sessions.
 */
export class HousekeepingComponent implements Component {
  readonly name = 'housekeeping';
  private running: { bookkeeping: Bookkeeping; janitor: Janitor; feedback: FeedbackIntake } | null =
    null;

  constructor(
    private readonly section: HousekeepingSection,
    private readonly deps: { store: StoreComponent; clock: Clock; logger: Logger },
  ) {}

  get bookkeeping(): Bookkeeping {
    return this.started().bookkeeping;
  }

  /** Provider feedback (bounces, complaints) received by the HTTP doors. */
  get feedback(): FeedbackIntake {
    return this.started().feedback;
  }

  async start(): Promise<void> {
    const { store, clock, logger } = this.deps;
    const bookkeeping = store.node.openBookkeeping();
    const janitor = new Janitor({
      bookkeeping,
      spool: store.spool,
      clock,
      logger,
      retentionDays: this.section.retention_days,
      sessionIdleSeconds: this.section.console.session_idle_seconds,
    });
    try {
      await janitor.start();
    } catch (err) {
      await janitor.stop();
      bookkeeping.close();
      throw err;
    }
    this.running = {
      bookkeeping,
      janitor,
      feedback: new FeedbackIntake(store.node.store, bookkeeping),
    };
  }

  async stop(): Promise<void> {
    const running = this.running;
    this.running = null;
    if (!running) return;
    await running.janitor.stop();
    running.bookkeeping.close();
  }

  private started(): NonNullable<HousekeepingComponent['running']> {
    if (!this.running) throw new Error('housekeeping is not started');
    return this.running;
  }
}
