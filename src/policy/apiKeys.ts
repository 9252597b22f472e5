import { createHash, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';
import { ContractError } from '../contract/errors.js';
import { newKeyId, randomAlphanumeric } from '../ids.js';
import { type ApiKeyRow, findKeyByHash, insertApiKey } from '../store/apiKeys.js';
import { policyReadGeneration } from '../store/policyCache.js';
import type { ProjectRow } from '../store/projects.js';
import type { Queries } from '../store/queries.js';

export type Environment = 'production' | 'sandbox';
export type KeyMode = 'live' | 'test';

export const KEY_PATTERN = /^ps_(live|test)_[A-Za-z0-9]{40}$/;
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

export const modeForEnvironment: Record<Environment, KeyMode> = {
  production: 'live',
  sandbox: 'test',
};

/**
 * Keys carry ~238 random bits, so a single SHA-256 is a sound verifier: there is nothing to
 * brute-force that a slow hash would protect, and lookups stay cheap on the hot path.
 */
export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** A key's or an operator token's state at `now`: revoked wins, then expiry. */
export function credentialState(
  c: { revoked_at: number | null; expires_at: number | null },
  now: number,
): 'active' | 'expired' | 'revoked' {
  return c.revoked_at !== null
    ? 'revoked'
    : c.expires_at !== null && c.expires_at <= now
      ? 'expired'
      : 'active';
}

export interface CreatedKey {
  row: ApiKeyRow;
  key: string;
}

export async function createApiKey(
  q: Queries,
  projectId: string,
  mode: KeyMode,
  now: number,
  expiresAt: number | null,
  name = '',
): Promise<CreatedKey> {
  const key = `ps_${mode}_${randomAlphanumeric(40)}`;
  const row: ApiKeyRow = {
    id: newKeyId(),
    project_id: projectId,
    name,
    mode,
    key_hash: hashApiKey(key),
    hint: `ps_${mode}_…${key.slice(-4)}`,
    created_at: now,
    expires_at: expiresAt,
    revoked_at: null,
  };
  await insertApiKey(q, row);
  return { row, key };
}

export interface AuthContext {
  project: ProjectRow;
  keyId: string;
  environment: Environment;
  /**
   * The policy generation the key, its project (and so the request's other policy reads:
   * checkProjectPolicy) are read as of, from this node's cache (store/policyCache.ts);
   * undefined on SQLite.
   */
  policyGeneration?: number;
}

/**
 * How a request's policy rows are read on PostgreSQL: 'checked' against the database's policy
 * generation first (one round trip), or 'cached': as this node's cache holds them, for a caller
 * that checks their generation against the database's in a statement of its own (Admission).
 */
export type PolicyRead = 'checked' | 'cached';

/** The bearer key in an Authorization header, or null when the header is not of the expected form. */
export function bearerKey(header: string | undefined): string | null {
  if (!header) return null;
  const m = BEARER.exec(header);
  return m && KEY_PATTERN.test(m[1]) ? m[1] : null;
}

/**
 * The contract's authentication table, in this order: missing_api_key → invalid_api_key
 * (unknown, revoked, project deleted) → key_expired → mode_mismatch.
 */
export async function authenticate(
  q: Queries,
  key: string | null,
  environment: Environment,
  clock: Clock,
  read: PolicyRead = 'checked',
): Promise<AuthContext> {
  if (!key) throw new ContractError('missing_api_key');
  const hash = hashApiKey(key);
  const policyGeneration = await policyReadGeneration(q, read === 'cached');
  const found = await findKeyByHash(q, hash, policyGeneration);
  if (
    !found ||
    !timingSafeEqual(found.key.key_hash, hash) ||
    found.key.revoked_at !== null ||
    found.project.deleted_at !== null
  ) {
    throw new ContractError('invalid_api_key');
  }
  if (found.key.expires_at !== null && found.key.expires_at <= clock.now())
    throw new ContractError('key_expired');
  if (found.key.mode !== modeForEnvironment[environment]) throw new ContractError('mode_mismatch');
  return { project: found.project, keyId: found.key.id, environment, policyGeneration };
}
