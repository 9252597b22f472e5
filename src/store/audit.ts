import type { Queries } from './queries.js';

export interface AuditRow {
  seq: number;
  at: number;
  /** An operator id, or `cli`. */
  actor: string;
  actor_email: string | null;
  action: string;
  target: string | null;
  client_ip: string | null;
  /** JSON object, or null. */
  details: string | null;
}

export async function insertAudit(q: Queries, row: Omit<AuditRow, 'seq'>): Promise<void> {
  await q.run(
    'INSERT INTO audit_log (at, actor, actor_email, action, target, client_ip, details) VALUES (@at, @actor, @actor_email, @action, @target, @client_ip, @details)',
    row,
  );
}

/** Newest first; `beforeSeq` continues a page. `actorEmail` matches the operator's email as written, in any case. */
export async function listAudit(
  q: Queries,
  filter: { actor?: string; actorEmail?: string; action?: string; beforeSeq?: number },
  limit: number,
): Promise<AuditRow[]> {
  return q.all<AuditRow>(
    `SELECT * FROM audit_log
      WHERE (CAST(@before AS BIGINT) IS NULL OR seq < @before) AND (CAST(@actor AS TEXT) IS NULL OR actor = @actor) AND (CAST(@action AS TEXT) IS NULL OR action = @action)
        AND (CAST(@email AS TEXT) IS NULL OR LOWER(actor_email) = LOWER(@email))
      ORDER BY seq DESC LIMIT @limit`,
    {
      before: filter.beforeSeq ?? null,
      actor: filter.actor ?? null,
      action: filter.action ?? null,
      email: filter.actorEmail ?? null,
      limit,
    },
  );
}
