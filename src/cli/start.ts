import { clockFromEnvironment } from '../clock.js';
import { loadConfig } from '../config/load.js';
import { createLogger } from '../log.js';
import { startPostern } from '../main.js';
import type { Output } from './output.js';

/** `postern start`: serves every listener until SIGTERM or SIGINT, then shuts down gracefully. */
export async function runStart(configPath: string, out: Output): Promise<number> {
  // A bad config throws ConfigError here, before the state directory is touched.
  const config = loadConfig(configPath);
  const logger = createLogger(process.env.POSTERN_LOG_LEVEL || config.log.level);
  // Handlers first: a supervisor may signal the moment it reads the ready line.
  let signalled: (signal: string) => void = () => undefined;
  const stopRequested = new Promise<string>((resolve) => (signalled = resolve));
  process.once('SIGTERM', () => signalled('SIGTERM'));
  process.once('SIGINT', () => signalled('SIGINT'));
  const running = await startPostern(config, logger, clockFromEnvironment());
  // SIGHUP (systemctl reload): the config file again, its live sections applied; the TLS pair
  // again. A file that does not load or validate refuses the whole reload: nothing changes, the
  // certificate included (its paths are the config's).
  process.on('SIGHUP', () => {
    try {
      const { changed, restart_needed } = running.reload(loadConfig(configPath));
      const line = { changed, restart_needed };
      if (restart_needed.length > 0) logger.warn(line, 'config reloaded; the sections in restart_needed changed but take effect only after a restart');
      else logger.info(line, 'config reloaded');
    } catch (err) {
      logger.error({ err }, 'config reload refused (the file does not load or validate); the running config and TLS certificate are kept');
      logger.flush();
      return;
    }
    try {
      running.reloadTls();
    } catch (err) {
      logger.error({ err }, 'TLS reload failed; keeping the current certificate');
    }
    // An operator is watching for the answer: out now, not when the log buffer fills.
    logger.flush();
  });
  out.print({ status: 'listening', state_dir: config.state_dir, listeners: running.listeners });
  logger.info({ signal: await stopRequested }, 'shutting down');
  await running.close();
  logger.flush();
  return 0;
}
