import type { Clock } from '../clock.js';
import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import type { Logger } from '../log.js';
import { type NodeListener, type NodeRun, nodeState } from '../store/nodes.js';

export interface NodeHeartbeatDeps {
  bookkeeping: Bookkeeping;
  clock: Clock;
  logger: Logger;
  id: string;
  heartbeatSeconds: number;
  version: string;
  hostname: string;
  pid: number;
}

/** A failed beat is logged and the next tries again: a missed beat only makes the node look stale for a while. */
export class NodeHeartbeat {
  private timer: NodeJS.Timeout | null = null;
  private run: NodeRun | null = null;
  private beating: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: NodeHeartbeatDeps) {}

  async start(listeners: NodeListener[]): Promise<void> {
    const { bookkeeping, clock, logger, id, heartbeatSeconds, version, hostname, pid } = this.deps;
    const now = clock.now();
    const row = {
      id,
      version,
      pid,
      hostname,
      started_at: now,
      last_beat_at: now,
      heartbeat_seconds: heartbeatSeconds,
      listeners,
    };
    const { result } = await bookkeeping.write('node', { type: 'register', row });
    this.run = { id, pid, started_at: now };
    const previous = result.previous;
    if (previous && nodeState(previous, now) === 'up') {
      // On one SQLite index the other one cannot be serving; on a shared database it may be.
      logger.warn(
        {
          node_id: id,
          other_pid: previous.pid,
          other_hostname: previous.hostname,
          other_last_beat_at: new Date(previous.last_beat_at).toISOString(),
        },
        `another node with node.id "${id}" beat ${Math.round((now - previous.last_beat_at) / 1000)} s ago and has not stopped: give each node its own node.id (POSTERN_NODE_ID)`,
      );
      logger.flush();
    }
    this.timer = setInterval(() => {
      this.beating = this.beat();
    }, heartbeatSeconds * 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.beating;
    if (!this.run) return;
    const run = this.run;
    this.run = null;
    try {
      await this.deps.bookkeeping.write('node', { type: 'stop', run, at: this.deps.clock.now() });
    } catch (err) {
      this.deps.logger.error(
        { err },
        'the node could not be marked stopped; it will show as missing',
      );
    }
  }

  private async beat(): Promise<void> {
    if (!this.run) return;
    try {
      const { result } = await this.deps.bookkeeping.write('node', {
        type: 'beat',
        run: this.run,
        at: this.deps.clock.now(),
      });
      if (result.changed || !this.run) return;
      // Said once: from here on the row is the other process's.
      this.deps.logger.warn(
        { node_id: this.run.id },
        'another process with the same node.id took over the node row; this one no longer beats in it',
      );
      this.run = null;
    } catch (err) {
      this.deps.logger.error({ err }, 'node heartbeat failed; the next one retries');
    }
  }
}
