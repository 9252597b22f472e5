import { allValues, getValue, type Queries } from './queries.js';

export type OperatorRole = 'owner' | 'member';

export interface OperatorRow {
  id: string;
  email: string;
  role: OperatorRole;
  password_hash: string;
  created_at: number;
  password_changed_at: number;
  /** 1 while the password is a generated one the operator has not changed yet (0 or 1 on both stores). */
  must_change_password: number;
}

export async function insertOperator(q: Queries, row: OperatorRow): Promise<void> {
  await q.run(
    `INSERT INTO operators (id, email, role, password_hash, created_at, password_changed_at, must_change_password)
     VALUES (@id, @email, @role, @password_hash, @created_at, @password_changed_at, @must_change_password)`,
    { ...row },
  );
}

export async function getOperator(q: Queries, id: string): Promise<OperatorRow | undefined> {
  return q.get<OperatorRow>('SELECT * FROM operators WHERE id = ?', id);
}

/** Emails compare case-insensitively (COLLATE NOCASE). */
export async function findOperatorByEmail(
  q: Queries,
  email: string,
): Promise<OperatorRow | undefined> {
  return q.get<OperatorRow>('SELECT * FROM operators WHERE email = ?', email);
}

export async function listOperators(q: Queries): Promise<OperatorRow[]> {
  return q.all<OperatorRow>('SELECT * FROM operators ORDER BY created_at, id');
}

export async function countOwners(q: Queries): Promise<number> {
  return (await getValue<number>(q, "SELECT COUNT(*) FROM operators WHERE role = 'owner'"))!;
}

/** Removes the operator with its project grants, sessions and tokens (ON DELETE CASCADE). */
export async function deleteOperator(q: Queries, id: string): Promise<boolean> {
  return (await q.run('DELETE FROM operators WHERE id = ?', id)) === 1;
}

/** A new password hash; `mustChange`: it was generated, and must be changed at the next sign-in. */
export async function setOperatorPassword(
  q: Queries,
  id: string,
  passwordHash: string,
  now: number,
  mustChange: boolean,
): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE operators SET password_hash = ?, password_changed_at = ?, must_change_password = ? WHERE id = ?',
      passwordHash,
      now,
      mustChange ? 1 : 0,
      id,
    )) === 1
  );
}

export async function setOperatorRole(
  q: Queries,
  id: string,
  role: OperatorRole,
): Promise<boolean> {
  return (await q.run('UPDATE operators SET role = ? WHERE id = ?', role, id)) === 1;
}

/** The projects a member was given (owners see every project and have none listed). */
export async function operatorProjectIds(q: Queries, operatorId: string): Promise<string[]> {
  return allValues<string>(
    q,
    'SELECT project_id FROM operator_projects WHERE operator_id = ? ORDER BY project_id',
    operatorId,
  );
}

export async function setOperatorProjects(
  q: Queries,
  operatorId: string,
  projectIds: readonly string[],
): Promise<void> {
  await q.run('DELETE FROM operator_projects WHERE operator_id = ?', operatorId);
  for (const projectId of new Set(projectIds))
    await q.run(
      'INSERT INTO operator_projects (operator_id, project_id) VALUES (?, ?)',
      operatorId,
      projectId,
    );
}
