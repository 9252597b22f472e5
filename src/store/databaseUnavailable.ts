/**
 * Whether an error from the store means the database could not be reached or went away (a
 * restart, a crash, a failover, a network cut: PostgreSQL's, as pg reports them), rather than that it refused a statement: the work may be
 * tried again as it was once the database is back. Such a failure cut off mid-COMMIT may have
 * committed all the same; a statement refused never did.
 */
export function databaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // SQLSTATE: 08 connection exception; 57P01-03 the server shutting down, crashed or starting
    // up; 53 out of connections or memory; 25006 read-only (a standby not yet promoted).
    if (/^(08|53)[0-9A-Z]{3}$/.test(code) || /^57P0[1-3]$/.test(code) || code === '25006') return true;
    if (SOCKET_ERRORS.has(code)) return true;
  }
  return PG_CONNECTION_MESSAGES.some((m) => err.message.includes(m));
}

const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** What pg and pg-pool say, with no code, of a connection lost, closed or never opened. */
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'not queryable',
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
];

/** A write refused because the database is unavailable (databaseUnavailable): the writer may keep it and try it again. */
export class DatabaseUnavailable extends Error {
  constructor(cause: Error) {
    super(cause.message);
    this.name = 'DatabaseUnavailable';
    // Where pg saw it: the line a reader of the log wants.
    this.stack = `DatabaseUnavailable: ${cause.stack ?? cause.message}`;
  }
}
