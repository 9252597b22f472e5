/** The viewer key as the one `viewer_key` row several PostgreSQL nodes share, so a link made through one opens on every other. */
import { getValue, type Queries } from './queries.js';

export function storedViewerKey(q: Queries): Promise<Buffer | undefined> {
  return getValue<Buffer>(q, 'SELECT secret FROM viewer_key WHERE id = 1');
}

/** Callers racing on an empty table all get the key written first. */
export async function storeViewerKey(q: Queries, candidate: Buffer, now: number): Promise<Buffer> {
  await q.run(
    'INSERT INTO viewer_key (id, secret, created_at) VALUES (1, ?, ?) ON CONFLICT DO NOTHING',
    candidate,
    now,
  );
  const stored = await storedViewerKey(q);
  if (!stored) throw new Error('viewer_key: no row after inserting one');
  return stored;
}
