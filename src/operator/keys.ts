import { credentialState, type KeyMode } from '../policy/apiKeys.js';
import { type ApiKeyRow, getApiKey, listApiKeys } from '../store/apiKeys.js';
import { apiKeyLastUsed } from '../store/apiKeyUsage.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

export interface KeyView {
  id: string;
  project_id: string;
  /** What the key is for ("billing worker"); '' for keys made before names. */
  name: string;
  mode: KeyMode;
  hint: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  /** When the key last authenticated a request (to within a minute; null: never). */
  last_used_at: string | null;
  state: 'active' | 'expired' | 'revoked';
}

async function keyView(ctx: OperatorContext, k: ApiKeyRow): Promise<KeyView> {
  const state = credentialState(k, ctx.clock.now());
  return {
    id: k.id,
    project_id: k.project_id,
    name: k.name ?? '',
    mode: k.mode,
    hint: k.hint,
    created_at: iso(k.created_at)!,
    expires_at: iso(k.expires_at),
    revoked_at: iso(k.revoked_at),
    last_used_at: iso(await apiKeyLastUsed(ctx.store, k.id)),
    state,
  };
}

const ISO_EXPIRY =
  /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** A date (midnight UTC) or an instant with an offset; an impossible day is refused, never rolled over. */
export function parseExpiry(
  ctx: OperatorContext,
  expires: string | undefined,
  field = 'expires_at',
): number | null {
  if (expires === undefined) return null;
  const m = ISO_EXPIRY.exec(expires);
  const at = m ? Date.parse(m[0].length === 10 ? `${expires}T00:00:00Z` : expires) : NaN;
  const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : null;
  const real =
    day !== null &&
    day.getUTCFullYear() === Number(m![1]) &&
    day.getUTCMonth() === Number(m![2]) - 1 &&
    day.getUTCDate() === Number(m![3]);
  if (!real || !Number.isFinite(at)) {
    throw new OperatorError(
      'invalid_argument',
      `--expires must be an ISO 8601 date (YYYY-MM-DD, midnight UTC) or instant with an offset (got "${expires}")`,
      field,
    );
  }
  if (at <= ctx.clock.now())
    throw new OperatorError('invalid_argument', '--expires must be in the future', field);
  return at;
}

function checkMode(mode: string): KeyMode {
  if (mode !== 'live' && mode !== 'test')
    throw new OperatorError('invalid_argument', '--mode must be live or test', 'mode');
  return mode;
}

/** Longest key name. */
export const MAX_KEY_NAME = 100;

/** The key itself is returned here once and never again: only its SHA-256 is stored. `name` says what it is for. */
export async function createKey(
  ctx: OperatorContext,
  projectId: string,
  mode: string,
  expires?: string,
  name = '',
): Promise<KeyView & { key: string }> {
  const checked = checkMode(mode);
  const label = name.trim();
  if (label.length > MAX_KEY_NAME || /\p{Cc}/u.test(label))
    throw new OperatorError(
      'invalid_argument',
      `the key name must be at most ${MAX_KEY_NAME} characters, without control characters`,
      'name',
    );
  await requireProject(ctx, projectId);
  const expiresAt = parseExpiry(ctx, expires);
  const created = await write(ctx, {
    type: 'key_create',
    project_id: projectId,
    mode: checked,
    name: label,
    now: ctx.clock.now(),
    expires_at: expiresAt,
    stamp: auditStamp(ctx),
  });
  return { ...(await keyView(ctx, await requireKey(ctx, created.id))), key: created.key };
}

export async function requireKey(ctx: OperatorContext, id: string): Promise<ApiKeyRow> {
  const key = await getApiKey(ctx.store, id);
  if (!key) throw notFound('key', id);
  return key;
}

export async function revokeKey(ctx: OperatorContext, id: string): Promise<KeyView> {
  await write(ctx, { type: 'key_revoke', id, now: ctx.clock.now(), stamp: auditStamp(ctx) });
  return keyView(ctx, await requireKey(ctx, id));
}

/** Longest grace a rotated-out key may keep working: 30 days. */
export const MAX_ROTATION_GRACE_SECONDS = 30 * 86_400;

/**
 * A new key of the same project and mode (returned once), and the old one expires after
 * `graceSeconds` (at once with 0; a key that expires sooner anyway keeps its time), so clients
 * can switch over without a refused request.
 */
export async function rotateKey(
  ctx: OperatorContext,
  id: string,
  graceSeconds: number,
): Promise<{ key: KeyView & { key: string }; previous: KeyView }> {
  if (
    !Number.isInteger(graceSeconds) ||
    graceSeconds < 0 ||
    graceSeconds > MAX_ROTATION_GRACE_SECONDS
  ) {
    throw new OperatorError(
      'invalid_argument',
      `the grace must be an integer number of seconds from 0 to ${MAX_ROTATION_GRACE_SECONDS}`,
      'grace_seconds',
    );
  }
  const made = await write(ctx, {
    type: 'key_rotate',
    id,
    now: ctx.clock.now(),
    grace_seconds: graceSeconds,
    stamp: auditStamp(ctx),
  });
  return {
    key: { ...(await keyView(ctx, await requireKey(ctx, made.id))), key: made.key },
    previous: await keyView(ctx, await requireKey(ctx, id)),
  };
}

export async function listKeys(
  ctx: OperatorContext,
  projectId: string,
): Promise<{ keys: KeyView[] }> {
  await requireProject(ctx, projectId);
  return {
    keys: await Promise.all((await listApiKeys(ctx.store, projectId)).map((k) => keyView(ctx, k))),
  };
}
