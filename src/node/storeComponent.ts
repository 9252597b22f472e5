import type { Clock } from '../clock.js';
import { type NodeStore, openNodeStore } from '../commit/nodeStore.js';
import type { PosternConfig } from '../config/load.js';
import { reconcileSpool } from '../housekeeping/reconcile.js';
import type { Logger } from '../log.js';
import type { LimitSettings } from '../policy/usageLimits.js';
import { viewerSecret } from '../policy/viewerKey.js';
import { Spool } from '../spool/spool.js';
import { loadSyncFilesystem } from '../spool/syncFilesystem.js';
import type { Component } from './components.js';

export type StoreSection = Pick<
  PosternConfig,
  'state_dir' | 'store' | 'spool' | 'metrics' | 'node'
>;

/** The state directory, spool and index (or shared database), reconciled before anything writes; and the viewer links' key. */
export class StoreComponent implements Component {
  readonly name = 'store';
  private opened: { spool: Spool; node: NodeStore; secret: Buffer } | null = null;

  constructor(
    private readonly section: StoreSection,
    private readonly deps: { limits: LimitSettings; clock: Clock; logger: Logger },
  ) {}

  get spool(): Spool {
    return this.open().spool;
  }

  get node(): NodeStore {
    return this.open().node;
  }

  get secret(): Buffer {
    return this.open().secret;
  }

  async start(): Promise<void> {
    const { section } = this;
    const { logger, clock, limits } = this.deps;
    const spoolSync = section.spool.sync === 'auto' && loadSyncFilesystem() ? 'syncfs' : 'fsync';
    const spool = new Spool(section.state_dir, logger);
    const node = await openNodeStore(section, logger, {
      limits,
      spoolSync,
      metrics: section.metrics.enabled,
      nodeId: section.node.id,
      // SQLite: the spool and the index agree before anything else writes (on PostgreSQL the bodies are rows).
      beforeWrites: async (index) => {
        await reconcileSpool(index, spool, logger, clock.now());
      },
    });
    if (node.backend === 'sqlite') {
      logger.info(
        { spool_sync: spoolSync },
        spoolSync === 'syncfs'
          ? 'spool files flushed once per commit group (syncfs)'
          : 'spool files flushed one by one (fsync)',
      );
    } else {
      // Scratch copies of bodies a crash cut off: each acceptance either committed its body to the database or never did.
      const scratch = spool.removeTempFiles();
      if (scratch.length > 0)
        logger.warn({ files: scratch.length }, 'removed scratch files left by an earlier run');
    }
    // Read before more threads start: a refused key file ends the start here.
    let secret: Buffer;
    try {
      secret = await viewerSecret(node.store, section.state_dir, logger, clock);
    } catch (err) {
      await node.close();
      throw err;
    }
    this.opened = { spool, node, secret };
  }

  async stop(): Promise<void> {
    const opened = this.opened;
    this.opened = null;
    await opened?.node.close();
  }

  private open(): { spool: Spool; node: NodeStore; secret: Buffer } {
    if (!this.opened) throw new Error('the store is not open');
    return this.opened;
  }
}
