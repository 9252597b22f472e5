import type { Queries } from './queries.js';

export interface SuppressionRow {
  project_id: string;
  email: string;
  reason: string;
  created_at: number;
}

/** Adds or refreshes an entry; addresses compare case-insensitively (COLLATE NOCASE). */
export async function addSuppression(q: Queries, row: SuppressionRow): Promise<void> {
  await q.run(
    `INSERT INTO suppressions (project_id, email, reason, created_at) VALUES (@project_id, @email, @reason, @created_at)
     ON CONFLICT (project_id, email) DO UPDATE SET reason = excluded.reason`,
    { ...row },
  );
}

export async function removeSuppression(
  q: Queries,
  projectId: string,
  email: string,
): Promise<boolean> {
  return (
    (await q.run(
      'DELETE FROM suppressions WHERE project_id = ? AND email = ?',
      projectId,
      email,
    )) === 1
  );
}

export async function listSuppressions(q: Queries, projectId: string): Promise<SuppressionRow[]> {
  return q.all<SuppressionRow>(
    'SELECT * FROM suppressions WHERE project_id = ? ORDER BY created_at, email',
    projectId,
  );
}

/** Which of these addresses the project suppresses (as given by the caller). */
export async function suppressedAmong(
  q: Queries,
  projectId: string,
  emails: string[],
): Promise<string[]> {
  const suppressed: string[] = [];
  for (const e of emails)
    if (
      (await q.get(
        'SELECT 1 FROM suppressions WHERE project_id = ? AND email = ?',
        projectId,
        e,
      )) !== undefined
    )
      suppressed.push(e);
  return suppressed;
}

/** A page of a project's suppressions by address (after `afterEmail`), those containing `search` when given. */
export async function searchSuppressions(
  q: Queries,
  projectId: string,
  search: string | null,
  afterEmail: string | null,
  limit: number,
): Promise<SuppressionRow[]> {
  return q.all<SuppressionRow>(
    // CITEXT: both engines compare and match the addresses without case (SQLite reads it as TEXT,
    // the column's NOCASE deciding), and PostgreSQL learns the parameters' types.
    `SELECT * FROM suppressions WHERE project_id = @project AND (CAST(@after AS CITEXT) IS NULL OR email > CAST(@after AS CITEXT))
       AND (CAST(@q AS CITEXT) IS NULL OR email LIKE CAST(@q AS CITEXT) ESCAPE '\\') ORDER BY email LIMIT @limit`,
    {
      project: projectId,
      after: afterEmail,
      q: search === null ? null : `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
      limit,
    },
  );
}
