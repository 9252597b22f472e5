import { clockFromEnvironment } from '../clock.js';
import { loadConfig } from '../config/load.js';
import { createLogger } from '../log.js';
import { startPostern } from '../main.js';
import type { Output } from './main.js';

/** `postern start`: serves every listener until SIGTERM or SIGINT, then shuts down gracefully. */
export async function runStart(configPath: string, out: Output): Promise<number> {
  // A bad config throws ConfigError here, before the state directory is touched.
  const config = loadConfig(configPath);
  const logger = createLogger(process.env.POSTERN_LOG_LEVEL ?? config.log.level);
  const running = await startPostern(config, logger, clockFromEnvironment());
  out.print({ status: 'listening', state_dir: config.state_dir, listeners: running.listeners });
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await running.close();
  logger.flush();
  return 0;
}
