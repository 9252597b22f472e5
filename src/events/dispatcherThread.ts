import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import type { PosternConfig } from '../config/load.js';
import type { StoreLocation } from '../commit/nodeStore.js';
import { nameThisThread, THREAD_NAMES } from '../platform/threadName.js';
import { lowerThreadPriority } from '../platform/threadPriority.js';

/** The webhook dispatcher's own thread (see host.ts). */
const { location, config, nodeId, clockOffsetMs, logLevel, bookkeepingPort } = workerData as {
  location: StoreLocation;
  config: Pick<PosternConfig, 'webhooks'>;
  nodeId: string;
  clockOffsetMs: number;
  logLevel: string;
  /** null on PostgreSQL: the thread writes through its own connections. */
  bookkeepingPort: MessagePort | null;
};

/** What the host posts: stop, or the node's new log level (SIGHUP). */
export type DispatcherThreadMessage = 'stop' | { logLevel: string };

// On Linux a scheduling policy and a nice value belong to the thread: this one yields the CPU
// to acceptance when the machine is saturated, and runs at full speed otherwise. (Elsewhere a
// nice value would apply to the whole process, so nothing is done.) Lowered before the thread
// loads the rest of its modules (imported below, not statically): loading them is about a
// second of CPU on a busy 2-core VM, which at normal priority was taken from the node's first
// requests, the thread starting as the listeners open.
const lowered = lowerThreadPriority(config.webhooks.nice);
nameThisThread(THREAD_NAMES.webhookDispatcher);
const [{ offsetClock }, { createLogger, setLogLevel }, { bookkeepingThrough, openThreadStore }, { webhookEngine }] = await Promise.all([
  import('../clock.js'),
  import('../log.js'),
  import('../commit/nodeStore.js'),
  import('./webhookWork.js'),
]);
const rootLogger = createLogger(logLevel);
const logger = rootLogger.child({ thread: 'webhooks' });
if (lowered) logger.warn({ err: lowered }, 'could not lower the webhook thread priority; it runs at the process priority');

// Its reads, on connections of its own; its writes go through the index writer thread (SQLite).
const connections = await openThreadStore(location, logger, 'webhooks');
const dispatcher = webhookEngine({ store: connections.store, clock: offsetClock(clockOffsetMs), logger, config, nodeId, countOutcomes: (outcomes) => parentPort!.postMessage({ webhookOutcomes: outcomes }), bookkeeping: bookkeepingThrough(bookkeepingPort, connections.store) });

parentPort!.on('message', (message: DispatcherThreadMessage) => {
  if (typeof message === 'object') return setLogLevel(rootLogger, message.logLevel);
  if (message !== 'stop') return;
  void dispatcher
    .stop()
    .catch((err: unknown) => logger.error({ err }, 'webhook dispatcher did not stop cleanly'))
    .finally(async () => {
      await connections.close().catch((err: unknown) => logger.warn({ err }, 'webhook dispatcher connections did not close cleanly'));
      logger.flush(() => parentPort!.close());
    });
});

// A start that fails (the cursor unreadable) ends the thread with that error; the host starts another.
await dispatcher.start();
