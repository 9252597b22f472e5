import { sql, type Db } from './db.js';
import { cachedPolicyRow } from './policyCache.js';
import type { ProjectRow } from './projects.js';

export interface ApiKeyRow {
  id: string;
  project_id: string;
  mode: 'live' | 'test';
  key_hash: Buffer;
  hint: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

export function insertApiKey(db: Db, row: Omit<ApiKeyRow, 'revoked_at'>): void {
  sql(
    db,
    'INSERT INTO api_keys (id, project_id, mode, key_hash, hint, created_at, expires_at) VALUES (@id, @project_id, @mode, @key_hash, @hint, @created_at, @expires_at)',
  ).run(row);
}

export interface KeyWithProject {
  key: ApiKeyRow;
  project: ProjectRow;
}

/** The key with this hash and its project, whatever their state; the caller judges validity. */
export function findKeyByHash(db: Db, hash: Buffer): KeyWithProject | undefined {
  return cachedPolicyRow(db, 'key', hash.toString('hex'), () => loadKeyByHash(db, hash));
}

function loadKeyByHash(db: Db, hash: Buffer): KeyWithProject | undefined {
  const row = sql(
    db,
    `SELECT k.id AS k_id, k.project_id AS k_project_id, k.mode AS k_mode, k.key_hash AS k_key_hash, k.hint AS k_hint,
            k.created_at AS k_created_at, k.expires_at AS k_expires_at, k.revoked_at AS k_revoked_at, p.*
       FROM api_keys k JOIN projects p ON p.id = k.project_id WHERE k.key_hash = ?`,
  ).get(hash) as Record<string, unknown> | undefined;
  if (!row) return undefined;
  const key: ApiKeyRow = {
    id: row.k_id as string,
    project_id: row.k_project_id as string,
    mode: row.k_mode as 'live' | 'test',
    key_hash: row.k_key_hash as Buffer,
    hint: row.k_hint as string,
    created_at: row.k_created_at as number,
    expires_at: row.k_expires_at as number | null,
    revoked_at: row.k_revoked_at as number | null,
  };
  const project: ProjectRow = {
    id: row.id as string,
    name: row.name as string,
    plan: row.plan as string,
    paused: row.paused as number,
    strategy: row.strategy as string,
    retention_days: row.retention_days as number | null,
    created_at: row.created_at as number,
    deleted_at: row.deleted_at as number | null,
  };
  return { key, project };
}

export function revokeApiKey(db: Db, id: string, now: number): boolean {
  return sql(db, 'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id).changes === 1;
}

export function getApiKey(db: Db, id: string): ApiKeyRow | undefined {
  return sql(db, 'SELECT * FROM api_keys WHERE id = ?').get(id) as ApiKeyRow | undefined;
}

export function listApiKeys(db: Db, projectId: string): ApiKeyRow[] {
  return sql(db, 'SELECT * FROM api_keys WHERE project_id = ? ORDER BY created_at').all(projectId) as ApiKeyRow[];
}

/** Brings a key's expiry forward to `at` (a rotation's grace); a key already expiring sooner keeps its time. */
export function shortenApiKeyExpiry(db: Db, id: string, at: number): boolean {
  return sql(db, 'UPDATE api_keys SET expires_at = MIN(COALESCE(expires_at, ?), ?) WHERE id = ? AND revoked_at IS NULL').run(at, at, id).changes === 1;
}
