import { createApiKey, type KeyMode } from '../policy/apiKeys.js';
import { getApiKey, listApiKeys, revokeApiKey, type ApiKeyRow } from '../store/apiKeys.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';

export interface KeyView {
  id: string;
  project_id: string;
  mode: KeyMode;
  hint: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  state: 'active' | 'expired' | 'revoked';
}

function keyView(ctx: OperatorContext, k: ApiKeyRow): KeyView {
  const state = k.revoked_at !== null ? 'revoked' : k.expires_at !== null && k.expires_at <= ctx.clock.now() ? 'expired' : 'active';
  return { id: k.id, project_id: k.project_id, mode: k.mode, hint: k.hint, created_at: iso(k.created_at)!, expires_at: iso(k.expires_at), revoked_at: iso(k.revoked_at), state };
}

const ISO_EXPIRY = /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** A date (midnight UTC) or an instant with an offset; an impossible day is refused, never rolled over. */
function parseExpiry(ctx: OperatorContext, expires: string | undefined): number | null {
  if (expires === undefined) return null;
  const m = ISO_EXPIRY.exec(expires);
  const at = m ? Date.parse(m[0].length === 10 ? `${expires}T00:00:00Z` : expires) : NaN;
  const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : null;
  const real = day !== null && day.getUTCFullYear() === Number(m![1]) && day.getUTCMonth() === Number(m![2]) - 1 && day.getUTCDate() === Number(m![3]);
  if (!real || !Number.isFinite(at)) {
    throw new OperatorError('invalid_argument', `--expires must be an ISO 8601 date (YYYY-MM-DD, midnight UTC) or instant with an offset (got "${expires}")`);
  }
  if (at <= ctx.clock.now()) throw new OperatorError('invalid_argument', '--expires must be in the future');
  return at;
}

/** The key itself is returned here once and never again: only its SHA-256 is stored. */
export function createKey(ctx: OperatorContext, projectId: string, mode: string, expires?: string): KeyView & { key: string } {
  if (mode !== 'live' && mode !== 'test') throw new OperatorError('invalid_argument', '--mode must be live or test');
  requireProject(ctx, projectId);
  const created = createApiKey(ctx.db, projectId, mode, ctx.clock.now(), parseExpiry(ctx, expires));
  return { ...keyView(ctx, created.row), key: created.key };
}

export function revokeKey(ctx: OperatorContext, id: string): KeyView {
  const key = getApiKey(ctx.db, id);
  if (!key) throw notFound('key', id);
  revokeApiKey(ctx.db, id, ctx.clock.now());
  return keyView(ctx, getApiKey(ctx.db, id)!);
}

export function listKeys(ctx: OperatorContext, projectId: string): { keys: KeyView[] } {
  requireProject(ctx, projectId);
  return { keys: listApiKeys(ctx.db, projectId).map((k) => keyView(ctx, k)) };
}
