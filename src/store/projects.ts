import { cachedPolicyRow } from './policyCache.js';
import { getValue, type Queries } from './queries.js';

export interface ProjectRow {
  id: string;
  name: string;
  plan: string;
  paused: number;
  strategy: string;
  retention_days: number | null;
  created_at: number;
  deleted_at: number | null;
}

export async function insertProject(
  q: Queries,
  row: Pick<ProjectRow, 'id' | 'name' | 'plan' | 'created_at'>,
): Promise<void> {
  await q.run(
    'INSERT INTO projects (id, name, plan, created_at) VALUES (@id, @name, @plan, @created_at)',
    row,
  );
}

export async function getProject(q: Queries, id: string): Promise<ProjectRow | undefined> {
  return cachedPolicyRow(q, 'project', id, () =>
    q.get<ProjectRow>('SELECT * FROM projects WHERE id = ? AND deleted_at IS NULL', id),
  );
}

/** The project's plan as committed now (not cached): what a commit checks the quotas against. */
export async function projectPlan(q: Queries, id: string): Promise<string> {
  return (await getValue<string>(q, 'SELECT plan FROM projects WHERE id = ?', id))!;
}

export async function listProjects(q: Queries): Promise<ProjectRow[]> {
  return q.all<ProjectRow>('SELECT * FROM projects WHERE deleted_at IS NULL ORDER BY created_at');
}

export async function setProjectPaused(q: Queries, id: string, paused: boolean): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE projects SET paused = ? WHERE id = ? AND deleted_at IS NULL',
      paused ? 1 : 0,
      id,
    )) === 1
  );
}

export async function setProjectPlan(q: Queries, id: string, plan: string): Promise<boolean> {
  return (
    (await q.run('UPDATE projects SET plan = ? WHERE id = ? AND deleted_at IS NULL', plan, id)) ===
    1
  );
}

export async function setProjectStrategy(
  q: Queries,
  id: string,
  strategy: string,
): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE projects SET strategy = ? WHERE id = ? AND deleted_at IS NULL',
      strategy,
      id,
    )) === 1
  );
}

export async function markProjectDeleted(q: Queries, id: string, now: number): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE projects SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL',
      now,
      id,
    )) === 1
  );
}
