/**
 * The viewer's signing key as the one `viewer_key` row (migration 13): what several nodes on
 * PostgreSQL share, so a link made through one opens on every other. A single SQLite node keeps
 * its key in the state directory instead (policy/viewerKey.ts) and leaves the table empty.
 */
import { getValue, type Queries } from './queries.js';

/** The stored key, or undefined before anyone has stored one. */
export function storedViewerKey(q: Queries): Promise<Buffer | undefined> {
  return getValue<Buffer>(q, 'SELECT secret FROM viewer_key WHERE id = 1');
}

/**
 * Stores `candidate` unless a key is stored already, and returns the stored key: `candidate`, or
 * the one written first. Callers racing on an empty table all get the same key (the later
 * inserts wait for the first to commit on the primary key, then do nothing).
 */
export async function storeViewerKey(q: Queries, candidate: Buffer, now: number): Promise<Buffer> {
  await q.run('INSERT INTO viewer_key (id, secret, created_at) VALUES (1, ?, ?) ON CONFLICT DO NOTHING', candidate, now);
  const stored = await storedViewerKey(q);
  if (!stored) throw new Error('viewer_key: no row after inserting one');
  return stored;
}
