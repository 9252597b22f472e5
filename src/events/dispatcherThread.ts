import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { offsetClock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { createLogger } from '../log.js';
import { BookkeepingClient } from '../commit/bookkeepingChannel.js';
import { lowerThreadPriority } from '../platform/threadPriority.js';
import { openDatabase } from '../store/db.js';
import { sqliteQueries } from '../store/queries.js';
import { WebhookDispatcher } from './dispatcher.js';

/** The webhook dispatcher's own thread (see host.ts). */
const { stateDir, config, clockOffsetMs, logLevel, bookkeepingPort } = workerData as {
  stateDir: string;
  config: Pick<PosternConfig, 'webhooks'>;
  clockOffsetMs: number;
  logLevel: string;
  bookkeepingPort: MessagePort;
};
const logger = createLogger(logLevel).child({ thread: 'webhooks' });

// On Linux a scheduling policy and a nice value belong to the thread: this one yields the CPU
// to acceptance when the machine is saturated, and runs at full speed otherwise. (Elsewhere a
// nice value would apply to the whole process, so nothing is done.)
const lowered = lowerThreadPriority(config.webhooks.nice);
if (lowered) logger.warn({ err: lowered }, 'could not lower the webhook thread priority; it runs at the process priority');

// Its reads, on a connection of its own; its writes go through the index writer thread.
const db = openDatabase(stateDir, logger, { migrate: false });
const dispatcher = new WebhookDispatcher({ store: sqliteQueries(db), clock: offsetClock(clockOffsetMs), logger, config, bookkeeping: new BookkeepingClient(bookkeepingPort) });

parentPort!.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  void dispatcher
    .stop()
    .catch((err: unknown) => logger.error({ err }, 'webhook dispatcher did not stop cleanly'))
    .finally(() => {
      db.close();
      logger.flush(() => parentPort!.close());
    });
});

// A start that fails (the cursor unreadable) ends the thread with that error; the host starts another.
await dispatcher.start();
