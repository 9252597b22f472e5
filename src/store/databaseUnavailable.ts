/** The database is unreachable or went away (not a refused statement): the work may be retried, and a cut-off COMMIT may have landed. */
export function databaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // SQLSTATE: 08 connection exception; 57P01-03 shutdown, crash or startup; 53 out of resources; 25006 read-only (an unpromoted standby).
    if (/^(08|53)[0-9A-Z]{3}$/.test(code) || /^57P0[1-3]$/.test(code) || code === '25006')
      return true;
    if (SOCKET_ERRORS.has(code)) return true;
  }
  return PG_CONNECTION_MESSAGES.some((m) => err.message.includes(m));
}

const SOCKET_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'not queryable',
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
];

export class DatabaseUnavailable extends Error {
  constructor(cause: Error) {
    super(cause.message);
    this.name = 'DatabaseUnavailable';
    // Where pg saw it: the line a reader of the log wants.
    this.stack = `DatabaseUnavailable: ${cause.stack ?? cause.message}`;
  }
}
