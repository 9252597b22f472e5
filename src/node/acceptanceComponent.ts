import { AcceptPipeline } from '../accept/acceptMessage.js';
import { SpoolWriters } from '../accept/writers.js';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { DiskGuard } from '../platform/diskSpace.js';
import { type LimitSettings, limitSettings } from '../policy/usageLimits.js';
import type { Component } from './components.js';
import type { StoreComponent } from './storeComponent.js';

export type AcceptanceSection = Pick<PosternConfig, 'spool' | 'state_dir' | 'policy'>;
export type AcceptanceLimitsSection = Pick<PosternConfig, 'plans' | 'default_plan' | 'limits'>;

/** The spool writer threads, the disk guard and the usage limits the index writer checks at commit. */
export class AcceptanceComponent implements Component<AcceptanceLimitsSection> {
  readonly name = 'acceptance';
  private running: {
    pipeline: AcceptPipeline;
    writers: SpoolWriters;
    disk: DiskGuard | null;
  } | null = null;
  private due: (() => void) | null = null;

  constructor(
    private readonly section: AcceptanceSection,
    private readonly deps: {
      store: StoreComponent;
      limits: LimitSettings;
      clock: Clock;
      logger: Logger;
    },
  ) {}

  get pipeline(): AcceptPipeline {
    if (!this.running) throw new Error('acceptance is not started');
    return this.running.pipeline;
  }

  get disk(): DiskGuard | null {
    return this.running?.disk ?? null;
  }

  whenDue(wake: () => void): void {
    this.due = wake;
  }

  async start(): Promise<void> {
    const { section } = this;
    const { store, limits, clock, logger } = this.deps;
    const writers = new SpoolWriters(
      store.spool,
      section.spool.writer_threads,
      section.spool.index_body_max_bytes,
      logger,
    );
    const disk =
      section.spool.min_free_bytes === 0
        ? null
        : new DiskGuard(section.state_dir, section.spool.min_free_bytes, logger);
    disk?.start();
    const pipeline = new AcceptPipeline({
      store: store.node.store,
      spool: store.spool,
      writers,
      indexWriter: store.node.acceptance,
      clock,
      logger,
      limits,
      disk,
      onDue: () => this.due?.(),
    });
    try {
      // A node that listens before its first writer thread is ready makes its first messages wait.
      await writers.ready();
    } catch (err) {
      await writers.close();
      disk?.stop();
      throw err;
    }
    this.running = { pipeline, writers, disk };
  }

  async stop(): Promise<void> {
    const running = this.running;
    this.running = null;
    if (!running) return;
    await running.writers.close();
    running.disk?.stop();
  }

  /** The index writer thread holds its own copy: set again. */
  reload(section: AcceptanceLimitsSection): void {
    const { limits, store } = this.deps;
    Object.assign(limits, limitSettings({ policy: this.section.policy, ...section }));
    store.node.acceptance.updateLimits(limits);
  }
}
