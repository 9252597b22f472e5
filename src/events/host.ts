import { type MessagePort, Worker } from 'node:worker_threads';
import { type Clock, ManualClock } from '../clock.js';
import {
  bookkeepingThrough,
  openThreadStore,
  type StoreLocation,
  type ThreadStore,
} from '../commit/nodeStore.js';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { countWebhookOutcome } from '../platform/metrics.js';
import { THREAD_NAMES } from '../platform/threadName.js';
import type { DispatcherThreadMessage } from './dispatcherThread.js';
import { type WebhookEngine, type WebhookOutcomeKind, webhookEngine } from './webhookWork.js';

export interface WebhookDispatcherHandle {
  start(): void;
  stop(): Promise<void>;
  setLogLevel(level: string): void;
}

const RESTART_DELAY_MS = 1000;

export interface WebhookDispatcherDeps {
  location: StoreLocation;
  clock: Clock;
  logger: Logger;
  /** All that crosses to its thread. */
  config: Pick<PosternConfig, 'webhooks'>;
  nodeId: string;
  /** None on PostgreSQL: it writes itself. */
  openBookkeepingPort: () => MessagePort | null;
}

/**
 * The dispatcher runs in its own thread at low priority (`webhooks.nice`), so the doors get the CPU first.
 * A ManualClock cannot cross threads: with one (tests) it runs on the event loop instead.
 */
export function createWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcherHandle {
  return deps.clock instanceof ManualClock
    ? new InProcessDispatcher(deps)
    : new ThreadedDispatcher(deps);
}

class InProcessDispatcher implements WebhookDispatcherHandle {
  private running: Promise<{ connections: ThreadStore; dispatcher: WebhookEngine }> | null = null;

  constructor(private readonly deps: WebhookDispatcherDeps) {}

  start(): void {
    if (this.running) return;
    this.running = this.open();
    this.running.then(
      ({ dispatcher }) =>
        dispatcher
          .start()
          .catch((err: unknown) =>
            this.deps.logger.error({ err }, 'webhook dispatcher did not start'),
          ),
      (err: unknown) => this.deps.logger.error({ err }, 'webhook dispatcher did not start'),
    );
  }

  private async open(): Promise<{ connections: ThreadStore; dispatcher: WebhookEngine }> {
    const connections = await openThreadStore(this.deps.location, this.deps.logger, 'webhooks');
    const bookkeeping = bookkeepingThrough(this.deps.openBookkeepingPort(), connections.store);
    const dispatcher = webhookEngine({
      store: connections.store,
      clock: this.deps.clock,
      logger: this.deps.logger,
      config: this.deps.config,
      nodeId: this.deps.nodeId,
      countOutcomes: (outcomes) => outcomes.forEach(countWebhookOutcome),
      bookkeeping,
    });
    return { connections, dispatcher };
  }

  /** Its logger is a child of the root: the root's new level has reached it. */
  setLogLevel(): void {}

  async stop(): Promise<void> {
    const running = this.running;
    if (!running) return;
    this.running = null;
    const opened = await running.catch(() => null);
    if (!opened) return;
    try {
      await opened.dispatcher.stop();
    } finally {
      await opened.connections.close();
    }
  }
}

class ThreadedDispatcher implements WebhookDispatcherHandle {
  private worker: Worker | null = null;
  private stopping = false;
  private restart: NodeJS.Timeout | null = null;

  constructor(private readonly deps: WebhookDispatcherDeps) {}

  start(): void {
    if (this.worker || this.stopping) return;
    // A new channel each start: a restarted thread cannot reuse the last one's port.
    const bookkeepingPort = this.deps.openBookkeepingPort();
    const worker = new Worker(new URL('./dispatcherThread.js', import.meta.url), {
      name: THREAD_NAMES.webhookDispatcher,
      transferList: bookkeepingPort ? [bookkeepingPort] : [],
      workerData: {
        bookkeepingPort,
        location: this.deps.location,
        config: this.deps.config,
        nodeId: this.deps.nodeId,
        clockOffsetMs: Math.round(this.deps.clock.now() - Date.now()),
        logLevel: this.deps.logger.level,
      },
    });
    this.worker = worker;
    worker.on('error', (err) =>
      this.deps.logger.error({ err }, 'webhook dispatcher thread failed'),
    );
    worker.on('message', (message: { webhookOutcomes?: WebhookOutcomeKind[] }) =>
      message.webhookOutcomes?.forEach(countWebhookOutcome),
    );
    worker.on('exit', (code) => {
      this.worker = null;
      if (this.stopping) return;
      // Nothing is lost (deliveries are rows; claims expire): start it again.
      this.deps.logger.error(
        { code },
        `webhook dispatcher thread exited; restarting in ${RESTART_DELAY_MS} ms`,
      );
      this.restart = setTimeout(() => {
        this.restart = null;
        this.start();
      }, RESTART_DELAY_MS);
      this.restart.unref();
    });
  }

  setLogLevel(level: string): void {
    this.worker?.postMessage({ logLevel: level } satisfies DispatcherThreadMessage);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.restart) clearTimeout(this.restart);
    const worker = this.worker;
    if (!worker) return;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('stop' satisfies DispatcherThreadMessage);
    const force = setTimeout(
      () => void worker.terminate(),
      this.deps.config.webhooks.timeout_ms + 5000,
    );
    await exited;
    clearTimeout(force);
  }
}
