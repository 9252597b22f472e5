import { Worker, type MessagePort } from 'node:worker_threads';
import { ManualClock, type Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { bookkeepingThrough, openThreadStore, type StoreLocation, type ThreadStore } from '../commit/nodeStore.js';
import { countWebhookOutcome } from '../platform/metrics.js';
import { THREAD_NAMES } from '../platform/threadName.js';
import { webhookEngine, type WebhookEngine, type WebhookOutcomeKind } from './webhookWork.js';
import type { DispatcherThreadMessage } from './dispatcherThread.js';

export interface WebhookDispatcherHandle {
  start(): void;
  /** Lets attempts in flight finish (each has its deadline), records their outcomes, stops. */
  stop(): Promise<void>;
  /** A new log level (SIGHUP): the dispatcher's thread logs by it from now on. */
  setLogLevel(level: string): void;
}

const RESTART_DELAY_MS = 1000;

export interface WebhookDispatcherDeps {
  /** Where the store is: the dispatcher reads on connections of its own. */
  location: StoreLocation;
  clock: Clock;
  logger: Logger;
  /** The section the dispatcher reads: all that crosses to its thread. */
  config: Pick<PosternConfig, 'webhooks'>;
  /** `node.id`: on PostgreSQL the owner of the deliveries the dispatcher leases. */
  nodeId: string;
  /** A new channel to the index writer thread, which runs the dispatcher's writes (none on PostgreSQL: it writes itself). */
  openBookkeepingPort: () => MessagePort | null;
}

/**
 * The dispatcher runs in its own worker thread, at a lower priority (`webhooks.nice`), so its
 * HTTP, signing and bookkeeping never take event-loop time from the doors and, on a saturated
 * machine, acceptance gets the CPU first (webhooks then lag, and catch up when it frees).
 * A ManualClock cannot cross threads: with one (tests of time-dependent rules) the same
 * dispatcher runs on the event loop instead.
 */
export function createWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcherHandle {
  return deps.clock instanceof ManualClock ? new InProcessDispatcher(deps) : new ThreadedDispatcher(deps);
}

/** The dispatcher on the event loop (a ManualClock), reading on a connection of its own, as its thread would. */
class InProcessDispatcher implements WebhookDispatcherHandle {
  private running: Promise<{ connections: ThreadStore; dispatcher: WebhookEngine }> | null = null;

  constructor(private readonly deps: WebhookDispatcherDeps) {}

  start(): void {
    if (this.running) return;
    this.running = this.open();
    this.running.then(
      ({ dispatcher }) => dispatcher.start().catch((err: unknown) => this.deps.logger.error({ err }, 'webhook dispatcher did not start')),
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

  /** Its logger is the node's own (a child of the root): the root's new level has reached it. */
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
        // The process clock is the system clock moved by a fixed offset (POSTERN_CLOCK_OFFSET_MS).
        clockOffsetMs: Math.round(this.deps.clock.now() - Date.now()),
        // The node's level now, a reload's included (a restarted thread starts with it).
        logLevel: this.deps.logger.level,
      },
    });
    this.worker = worker;
    worker.on('error', (err) => this.deps.logger.error({ err }, 'webhook dispatcher thread failed'));
    // Its recorded outcomes (PostgreSQL), counted in this thread's registry, which GET /metrics reads.
    worker.on('message', (message: { webhookOutcomes?: WebhookOutcomeKind[] }) => message.webhookOutcomes?.forEach(countWebhookOutcome));
    worker.on('exit', (code) => {
      this.worker = null;
      if (this.stopping) return;
      // Nothing is lost (deliveries are rows; claims expire): start it again.
      this.deps.logger.error({ code }, `webhook dispatcher thread exited; restarting in ${RESTART_DELAY_MS} ms`);
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
    // In-flight attempts end by their deadline; past that (and a margin) the thread is stopped.
    const force = setTimeout(() => void worker.terminate(), this.deps.config.webhooks.timeout_ms + 5000);
    await exited;
    clearTimeout(force);
  }
}
