import type { Queries } from './queries.js';

/** A public viewer link made (the link itself, a credential, is never stored: only its id). */
export interface ViewerLinkRow {
  /** `vl.…`; its token names it. */
  id: string;
  message_id: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
  /** An operator id, or `cli`. */
  created_by: string;
  created_by_email: string | null;
}

export async function insertViewerLink(
  q: Queries,
  row: Omit<ViewerLinkRow, 'revoked_at'>,
): Promise<void> {
  await q.run(
    'INSERT INTO viewer_links (id, message_id, created_at, expires_at, created_by, created_by_email) VALUES (@id, @message_id, @created_at, @expires_at, @created_by, @created_by_email)',
    row,
  );
}

export async function getViewerLink(q: Queries, id: string): Promise<ViewerLinkRow | undefined> {
  return q.get<ViewerLinkRow>('SELECT * FROM viewer_links WHERE id = ?', id);
}

/** A message's links that still open it at `now` (not revoked, not expired), newest first. */
export async function liveViewerLinks(
  q: Queries,
  messageId: string,
  now: number,
): Promise<ViewerLinkRow[]> {
  return q.all<ViewerLinkRow>(
    'SELECT * FROM viewer_links WHERE message_id = ? AND revoked_at IS NULL AND expires_at > ? ORDER BY created_at DESC, id DESC',
    messageId,
    now,
  );
}

/** Revokes a link of `messageId`; false when there is no such link of that message, or it was revoked already. */
export async function revokeViewerLink(
  q: Queries,
  messageId: string,
  id: string,
  now: number,
): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE viewer_links SET revoked_at = ? WHERE id = ? AND message_id = ? AND revoked_at IS NULL',
      now,
      id,
      messageId,
    )) === 1
  );
}
