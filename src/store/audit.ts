import { sql, type Db } from './db.js';

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

export function insertAudit(db: Db, row: Omit<AuditRow, 'seq'>): void {
  sql(db, 'INSERT INTO audit_log (at, actor, actor_email, action, target, client_ip, details) VALUES (@at, @actor, @actor_email, @action, @target, @client_ip, @details)').run(row);
}

/** Newest first; `beforeSeq` continues a page. */
export function listAudit(db: Db, filter: { actor?: string; action?: string; beforeSeq?: number }, limit: number): AuditRow[] {
  return sql(
    db,
    `SELECT * FROM audit_log
      WHERE (@before IS NULL OR seq < @before) AND (@actor IS NULL OR actor = @actor) AND (@action IS NULL OR action = @action)
      ORDER BY seq DESC LIMIT @limit`,
  ).all({ before: filter.beforeSeq ?? null, actor: filter.actor ?? null, action: filter.action ?? null, limit }) as AuditRow[];
}
