import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The one logger: structured JSON on stderr (stdout belongs to CLI output). Secrets and bodies
 * are never passed to it; the redaction list is a second line of defence.
 */
export function createLogger(level: string = process.env.POSTERN_LOG_LEVEL ?? 'info'): Logger {
  return pino(
    {
      level,
      base: { service: 'postern' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: ['key', 'api_key', 'apiKey', 'password', 'pass', 'secret', 'authorization', '*.authorization', '*.key', '*.password', '*.pass', '*.secret', 'headers.authorization'],
        censor: '[redacted]',
      },
    },
    // Buffered (4 KiB) asynchronous writes: one syscall per many lines on the request path.
    // stop() flushes; a crash may lose the last few lines, never data.
    pino.destination({ fd: 2, sync: false, minLength: 4096 }),
  );
}

/** A logger that drops everything (tests and CLI runs that asked for quiet). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
