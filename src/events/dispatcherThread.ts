import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { offsetClock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { createLogger } from '../log.js';
import { WebhookDispatcher } from './dispatcher.js';

/** The webhook dispatcher's own thread (see host.ts). */
const { stateDir, config, clockOffsetMs, logLevel } = workerData as { stateDir: string; config: PosternConfig; clockOffsetMs: number; logLevel: string };
const logger = createLogger(logLevel).child({ thread: 'webhooks' });

// On Linux a nice value belongs to the thread: this one yields the CPU to acceptance when the
// machine is saturated, and runs at full speed otherwise. (Elsewhere it would renice the whole
// process, so it is not done.)
const nice = config.webhooks.nice;
if (nice > 0 && process.platform === 'linux') {
  try {
    os.setPriority(Math.max(os.getPriority(), nice));
  } catch (err) {
    logger.warn({ err }, 'could not lower the webhook thread priority; it runs at the process priority');
  }
}

const dispatcher = new WebhookDispatcher({ stateDir, clock: offsetClock(clockOffsetMs), logger, config });
dispatcher.start();

parentPort!.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  void dispatcher
    .stop()
    .catch((err: unknown) => logger.error({ err }, 'webhook dispatcher did not stop cleanly'))
    .finally(() => logger.flush(() => parentPort!.close()));
});
