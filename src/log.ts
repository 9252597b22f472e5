import { pino, stdSerializers, type Logger } from 'pino';

export type { Logger };

/**
 * Secrets that can hide inside text the code does not write itself (an error's message or
 * stack, a request path): API keys, webhook signing secrets, bearer and basic credentials, a
 * URL's password, and the URL secret of provider feedback endpoints
 * (`/v1/feedback/<account>/<secret>`, Postmark, Brevo, SES) and of public viewer links
 * (`/view/<id>/<token>`).
 */
const SECRET_PATTERNS: [RegExp, string][] = [
  [/\bps_(live|test)_[A-Za-z0-9]{40}\b/g, 'ps_$1_[redacted]'],
  [/\bwhsec_[A-Za-z0-9+/=_-]+/g, 'whsec_[redacted]'],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, '$1 [redacted]'],
  [/(\/\/[^/\s:@]*):[^@\s/]*@/g, '$1:[redacted]@'],
  [/(\/v1\/feedback\/[^/\s?#]+\/)[^\s?#"']+/g, '$1***'],
  [/(\/view\/[^/\s?#]+\/)[^/\s?#"']+/g, '$1***'],
];

/** `text` with every secret of SECRET_PATTERNS masked. */
export function maskSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/** pino's error serializer, with secrets masked in the message and stack. */
function maskedError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const serialized = stdSerializers.err(err) as unknown as Record<string, unknown>;
  for (const field of ['message', 'stack']) {
    const value = serialized[field];
    if (typeof value === 'string') serialized[field] = maskSecrets(value);
  }
  return serialized;
}

/**
 * The one logger: structured JSON on stderr (stdout belongs to CLI output). Secrets and bodies
 * are never passed to it; the redaction list and the error serializer are a second line of
 * defence.
 */
export function createLogger(level: string = process.env.POSTERN_LOG_LEVEL ?? 'info'): Logger {
  return pino(
    {
      level,
      base: { service: 'postern' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: maskedError },
      redact: {
        // Each `*.` path costs every log line about 1 µs (the request line is written per request):
        // new names are added at the top level only.
        paths: [
          'key', 'api_key', 'apiKey', 'password', 'pass', 'secret', 'webhook_secret', 'token', 'authorization',
          '*.authorization', '*.key', '*.password', '*.pass', '*.secret', 'headers.authorization',
        ],
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
