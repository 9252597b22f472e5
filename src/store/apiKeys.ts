import { cachedPolicyRow } from './policyCache.js';
import type { ProjectRow } from './projects.js';
import type { Queries } from './queries.js';

export interface ApiKeyRow {
  id: string;
  project_id: string;
  /** What the key is for; '' for keys made before names (migration 17). */
  name?: string;
  mode: 'live' | 'test';
  key_hash: Buffer;
  hint: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

export async function insertApiKey(q: Queries, row: Omit<ApiKeyRow, 'revoked_at'>): Promise<void> {
  await q.run(
    'INSERT INTO api_keys (id, project_id, name, mode, key_hash, hint, created_at, expires_at) VALUES (@id, @project_id, @name, @mode, @key_hash, @hint, @created_at, @expires_at)',
    { ...row, name: row.name ?? '' },
  );
}

export interface KeyWithProject {
  key: ApiKeyRow;
  project: ProjectRow;
}

/** The key with this hash and its project, whatever their state; the caller judges validity. `asOf`: see cachedPolicyRow. */
export async function findKeyByHash(
  q: Queries,
  hash: Buffer,
  asOf?: number,
): Promise<KeyWithProject | undefined> {
  return cachedPolicyRow(q, 'key', hash.toString('hex'), () => loadKeyByHash(q, hash), asOf);
}

async function loadKeyByHash(q: Queries, hash: Buffer): Promise<KeyWithProject | undefined> {
  const row = await q.get<Record<string, unknown>>(
    `SELECT k.id AS k_id, k.project_id AS k_project_id, k.mode AS k_mode, k.key_hash AS k_key_hash, k.hint AS k_hint,
            k.created_at AS k_created_at, k.expires_at AS k_expires_at, k.revoked_at AS k_revoked_at, p.*
       FROM api_keys k JOIN projects p ON p.id = k.project_id WHERE k.key_hash = ?`,
    hash,
  );
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

export async function revokeApiKey(q: Queries, id: string, now: number): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL',
      now,
      id,
    )) === 1
  );
}

export async function getApiKey(q: Queries, id: string): Promise<ApiKeyRow | undefined> {
  return q.get<ApiKeyRow>('SELECT * FROM api_keys WHERE id = ?', id);
}

export async function listApiKeys(q: Queries, projectId: string): Promise<ApiKeyRow[]> {
  return q.all<ApiKeyRow>(
    'SELECT * FROM api_keys WHERE project_id = ? ORDER BY created_at',
    projectId,
  );
}

/** Brings a key's expiry forward to `at` (a rotation's grace); a key already expiring sooner keeps its time. */
export async function shortenApiKeyExpiry(q: Queries, id: string, at: number): Promise<boolean> {
  // CASE, not SQLite's two-argument MIN (PostgreSQL has LEAST): one statement for both engines.
  return (
    (await q.run(
      'UPDATE api_keys SET expires_at = CASE WHEN expires_at IS NOT NULL AND expires_at < CAST(? AS BIGINT) THEN expires_at ELSE CAST(? AS BIGINT) END WHERE id = ? AND revoked_at IS NULL',
      at,
      at,
      id,
    )) === 1
  );
}
