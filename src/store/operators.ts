import { sql, type Db } from './db.js';

export type OperatorRole = 'owner' | 'member';

export interface OperatorRow {
  id: string;
  email: string;
  role: OperatorRole;
  password_hash: string;
  created_at: number;
  password_changed_at: number;
}

export function insertOperator(db: Db, row: OperatorRow): void {
  sql(
    db,
    `INSERT INTO operators (id, email, role, password_hash, created_at, password_changed_at)
     VALUES (@id, @email, @role, @password_hash, @created_at, @password_changed_at)`,
  ).run(row);
}

export function getOperator(db: Db, id: string): OperatorRow | undefined {
  return sql(db, 'SELECT * FROM operators WHERE id = ?').get(id) as OperatorRow | undefined;
}

/** Emails compare case-insensitively (COLLATE NOCASE). */
export function findOperatorByEmail(db: Db, email: string): OperatorRow | undefined {
  return sql(db, 'SELECT * FROM operators WHERE email = ?').get(email) as OperatorRow | undefined;
}

export function listOperators(db: Db): OperatorRow[] {
  return sql(db, 'SELECT * FROM operators ORDER BY created_at, id').all() as OperatorRow[];
}

export function countOwners(db: Db): number {
  return sql(db, "SELECT COUNT(*) FROM operators WHERE role = 'owner'").pluck().get() as number;
}

/** Removes the operator with its project grants, sessions and tokens (ON DELETE CASCADE). */
export function deleteOperator(db: Db, id: string): boolean {
  return sql(db, 'DELETE FROM operators WHERE id = ?').run(id).changes === 1;
}

export function setOperatorPassword(db: Db, id: string, passwordHash: string, now: number): boolean {
  return sql(db, 'UPDATE operators SET password_hash = ?, password_changed_at = ? WHERE id = ?').run(passwordHash, now, id).changes === 1;
}

export function setOperatorRole(db: Db, id: string, role: OperatorRole): boolean {
  return sql(db, 'UPDATE operators SET role = ? WHERE id = ?').run(role, id).changes === 1;
}

/** The projects a member was given (owners see every project and have none listed). */
export function operatorProjectIds(db: Db, operatorId: string): string[] {
  return sql(db, 'SELECT project_id FROM operator_projects WHERE operator_id = ? ORDER BY project_id').pluck().all(operatorId) as string[];
}

export function setOperatorProjects(db: Db, operatorId: string, projectIds: readonly string[]): void {
  sql(db, 'DELETE FROM operator_projects WHERE operator_id = ?').run(operatorId);
  const insert = sql(db, 'INSERT INTO operator_projects (operator_id, project_id) VALUES (?, ?)');
  for (const projectId of new Set(projectIds)) insert.run(operatorId, projectId);
}
