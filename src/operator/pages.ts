import { OperatorError } from './errors.js';

/**
 * Cursors are opaque to clients: base64url of where the last page ended (a seq or an id).
 * A cursor this server did not give is refused as invalid, never guessed at.
 */
export const encodeCursor = (position: string): string =>
  Buffer.from(position, 'utf8').toString('base64url');

export function decodeCursor(cursor: string): string {
  const position = Buffer.from(cursor, 'base64url').toString('utf8');
  if (position === '' || encodeCursor(position) !== cursor)
    throw new OperatorError('invalid_argument', 'cursor is not one this list gave', 'cursor');
  return position;
}

/** A page size: an integer from 1 to `max`. */
export function pageLimit(limit: number | undefined, fallback: number, max: number): number {
  const n = limit ?? fallback;
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new OperatorError(
      'invalid_argument',
      `limit must be an integer from 1 to ${max}`,
      'limit',
    );
  return n;
}
