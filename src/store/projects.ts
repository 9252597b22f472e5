import { sql, type Db } from './db.js';
import { cachedPolicyRow } from './policyCache.js';

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

export function insertProject(db: Db, row: Pick<ProjectRow, 'id' | 'name' | 'plan' | 'created_at'>): void {
  sql(db, 'INSERT INTO projects (id, name, plan, created_at) VALUES (@id, @name, @plan, @created_at)').run(row);
}

export function getProject(db: Db, id: string): ProjectRow | undefined {
  return cachedPolicyRow(db, 'project', id, () => sql(db, 'SELECT * FROM projects WHERE id = ? AND deleted_at IS NULL').get(id) as ProjectRow | undefined);
}

/** The project's plan as committed now (not cached): what a commit checks the quotas against. */
export function projectPlan(db: Db, id: string): string {
  return sql(db, 'SELECT plan FROM projects WHERE id = ?').pluck().get(id) as string;
}

export function listProjects(db: Db): ProjectRow[] {
  return sql(db, 'SELECT * FROM projects WHERE deleted_at IS NULL ORDER BY created_at').all() as ProjectRow[];
}

export function setProjectPaused(db: Db, id: string, paused: boolean): boolean {
  return sql(db, 'UPDATE projects SET paused = ? WHERE id = ? AND deleted_at IS NULL').run(paused ? 1 : 0, id).changes === 1;
}

export function setProjectPlan(db: Db, id: string, plan: string): boolean {
  return sql(db, 'UPDATE projects SET plan = ? WHERE id = ? AND deleted_at IS NULL').run(plan, id).changes === 1;
}

export function setProjectStrategy(db: Db, id: string, strategy: string): boolean {
  return sql(db, 'UPDATE projects SET strategy = ? WHERE id = ? AND deleted_at IS NULL').run(strategy, id).changes === 1;
}

export function markProjectDeleted(db: Db, id: string, now: number): boolean {
  return sql(db, 'UPDATE projects SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL').run(now, id).changes === 1;
}
