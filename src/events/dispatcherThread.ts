import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import type { StoreLocation } from '../commit/nodeStore.js';
import type { PosternConfig } from '../config/load.js';
import { nameThisThread, THREAD_NAMES } from '../platform/threadName.js';
import { lowerThreadPriority } from '../platform/threadPriority.js';

const { location, config, nodeId, clockOffsetMs, logLevel, bookkeepingPort } = workerData as {
  location: StoreLocation;
  config: Pick<PosternConfig, 'webhooks'>;
  nodeId: string;
  clockOffsetMs: number;
  logLevel: string;
  bookkeepingPort: MessagePort | null;
};

export type DispatcherThreadMessage = 'stop' | { logLevel: string };

// Lowered before the thread loads the rest of its modules (imported below): loading them takes about a second of CPU on
// a busy 2-core VM, taken from the node's first requests at normal priority (docs/architecture.md#webhooks).
const lowered = lowerThreadPriority(config.webhooks.nice);
nameThisThread(THREAD_NAMES.webhookDispatcher);
const [
  { offsetClock },
  { createLogger, setLogLevel },
  { bookkeepingThrough, openThreadStore },
  { webhookEngine },
] = await Promise.all([
  import('../clock.js'),
  import('../log.js'),
  import('../commit/nodeStore.js'),
  import('./webhookWork.js'),
]);
const rootLogger = createLogger(logLevel);
const logger = rootLogger.child({ thread: 'webhooks' });
if (lowered)
  logger.warn(
    { err: lowered },
    'could not lower the webhook thread priority; it runs at the process priority',
  );

const connections = await openThreadStore(location, logger, 'webhooks');
const dispatcher = webhookEngine({
  store: connections.store,
  clock: offsetClock(clockOffsetMs),
  logger,
  config,
  nodeId,
  countOutcomes: (outcomes) => parentPort!.postMessage({ webhookOutcomes: outcomes }),
  bookkeeping: bookkeepingThrough(bookkeepingPort, connections.store),
});

parentPort!.on('message', (message: DispatcherThreadMessage) => {
  if (typeof message === 'object') return setLogLevel(rootLogger, message.logLevel);
  if (message !== 'stop') return;
  void dispatcher
    .stop()
    .catch((err: unknown) => logger.error({ err }, 'webhook dispatcher did not stop cleanly'))
    .finally(async () => {
      await connections
        .close()
        .catch((err: unknown) =>
          logger.warn({ err }, 'webhook dispatcher connections did not close cleanly'),
        );
      logger.flush(() => parentPort!.close());
    });
});

// A start that fails (the cursor unreadable) ends the thread with that error; the host starts another.
await dispatcher.start();
