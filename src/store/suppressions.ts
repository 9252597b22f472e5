import { sql, type Db } from './db.js';

export interface SuppressionRow {
  project_id: string;
  email: string;
  reason: string;
  created_at: number;
}

/** Adds or refreshes an entry; addresses compare case-insensitively (COLLATE NOCASE). */
export function addSuppression(db: Db, row: SuppressionRow): void {
  sql(
    db,
    `INSERT INTO suppressions (project_id, email, reason, created_at) VALUES (@project_id, @email, @reason, @created_at)
     ON CONFLICT (project_id, email) DO UPDATE SET reason = excluded.reason`,
  ).run(row);
}

export function removeSuppression(db: Db, projectId: string, email: string): boolean {
  return sql(db, 'DELETE FROM suppressions WHERE project_id = ? AND email = ?').run(projectId, email).changes === 1;
}

export function listSuppressions(db: Db, projectId: string): SuppressionRow[] {
  return sql(db, 'SELECT * FROM suppressions WHERE project_id = ? ORDER BY created_at, email').all(projectId) as SuppressionRow[];
}

/** Which of these addresses the project suppresses (as given by the caller). */
export function suppressedAmong(db: Db, projectId: string, emails: string[]): string[] {
  const stmt = sql(db, 'SELECT 1 FROM suppressions WHERE project_id = ? AND email = ?');
  return emails.filter((e) => stmt.get(projectId, e) !== undefined);
}

/** A page of a project's suppressions by address (after `afterEmail`), those containing `q` when given. */
export function searchSuppressions(db: Db, projectId: string, q: string | null, afterEmail: string | null, limit: number): SuppressionRow[] {
  return sql(
    db,
    `SELECT * FROM suppressions WHERE project_id = @project AND (@after IS NULL OR email > @after)
       AND (@q IS NULL OR email LIKE @q ESCAPE '\\') ORDER BY email LIMIT @limit`,
  ).all({ project: projectId, after: afterEmail, q: q === null ? null : `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`, limit }) as SuppressionRow[];
}
