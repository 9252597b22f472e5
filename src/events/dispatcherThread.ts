import os from 'node:os';
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { offsetClock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { createLogger } from '../log.js';
import { linuxAddon } from '../platform/linuxAddon.js';
import { BookkeepingClient } from '../commit/bookkeepingChannel.js';
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
lowerThreadPriority(config.webhooks.nice);

function lowerThreadPriority(setting: 'idle' | number): void {
  if (process.platform !== 'linux' || setting === 0) return;
  const addon = setting === 'idle' ? linuxAddon() : null;
  try {
    if (addon) {
      addon.idleScheduling();
      return;
    }
    // "idle" without the addon: the lowest nice value stands in.
    os.setPriority(Math.max(os.getPriority(), setting === 'idle' ? 19 : setting));
  } catch (err) {
    logger.warn({ err }, 'could not lower the webhook thread priority; it runs at the process priority');
  }
}

const dispatcher = new WebhookDispatcher({ stateDir, clock: offsetClock(clockOffsetMs), logger, config, bookkeeping: new BookkeepingClient(bookkeepingPort) });
dispatcher.start();

parentPort!.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  void dispatcher
    .stop()
    .catch((err: unknown) => logger.error({ err }, 'webhook dispatcher did not stop cleanly'))
    .finally(() => logger.flush(() => parentPort!.close()));
});
