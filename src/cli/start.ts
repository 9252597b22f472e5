import { clockFromEnvironment } from '../clock.js';
import { loadConfig } from '../config/load.js';
import { createLogger } from '../log.js';
import { listOperators } from '../store/operators.js';
import type { Output } from './output.js';
import { cliInvocation, noticeText, startNotices } from './startNotices.js';

/** `configFlag`: repeated in the commands it suggests. */
export async function runStart(
  configPath: string,
  out: Output,
  configFlag?: string,
): Promise<number> {
  // A bad config throws ConfigError here, before the state directory is touched.
  const config = loadConfig(configPath);
  const logger = createLogger(process.env.POSTERN_LOG_LEVEL || config.log.level);
  // Handlers first: a supervisor may signal the moment it reads the ready line.
  let signalled: (signal: string) => void = () => undefined;
  const stopRequested = new Promise<string>((resolve) => (signalled = resolve));
  process.once('SIGTERM', () => signalled('SIGTERM'));
  process.once('SIGINT', () => signalled('SIGINT'));
  // Loaded once the config is known good: a refused config costs only its own check.
  const { startPostern } = await import('../main.js');
  const running = await startPostern(config, logger, clockFromEnvironment());
  // A file that does not load or validate refuses the whole reload, the certificate included.
  process.on('SIGHUP', () => {
    try {
      const { changed, restart_needed } = running.reload(loadConfig(configPath));
      const line = { changed, restart_needed };
      if (restart_needed.length > 0)
        logger.warn(
          line,
          'config reloaded; the sections in restart_needed changed but take effect only after a restart',
        );
      else logger.info(line, 'config reloaded');
    } catch (err) {
      logger.error(
        { err },
        'config reload refused (the file does not load or validate); the running config and TLS certificate are kept',
      );
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
  const notices = startNotices(
    running.listeners,
    (await listOperators(running.store)).length > 0,
    cliInvocation(process.argv[1] ?? 'postern', process.cwd(), configFlag),
  );
  const started = {
    status: 'listening',
    state_dir: config.state_dir,
    listeners: running.listeners,
  };
  if (out.json) out.print({ ...started, ...notices });
  else {
    out.print(started);
    const text = noticeText(notices);
    if (text) process.stdout.write(`${text}\n`);
  }
  // Logged too: a supervisor's journal shows it where the output is not seen.
  if (notices.first_run)
    logger.info(
      notices.first_run,
      'no operator exists yet: create the first owner with create_owner, then sign in at console_url',
    );
  if (notices.plain_text_listeners.length > 0)
    logger.warn(
      { listeners: notices.plain_text_listeners },
      'listeners serve plain text on an address other hosts can reach: API keys and passwords cross the network in clear (give them cert/key or acme, or bind them to 127.0.0.1 behind a TLS proxy)',
    );
  if (notices.first_run || notices.plain_text_listeners.length > 0) logger.flush();
  logger.info({ signal: await stopRequested }, 'shutting down');
  await running.close();
  logger.flush();
  return 0;
}
