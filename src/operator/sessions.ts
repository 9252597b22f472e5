import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { PasswordSetResult } from '../commit/operatorWrites.js';
import {
  findOperatorSession,
  findOperatorTokenByHash,
  getOperatorToken,
} from '../store/operatorSessions.js';
import {
  findOperatorByEmail,
  getOperator,
  type OperatorRow,
  operatorProjectIds,
} from '../store/operators.js';
import { auditStamp } from './audit.js';
import type { OperatorContext } from './context.js';
import { OperatorError } from './errors.js';
import { hashOperatorToken, TOKEN_PATTERN } from './operators.js';
import {
  checkPasswordRules,
  hashPassword,
  verifyAgainstDummy,
  verifyPassword,
} from './passwords.js';
import { write } from './writer.js';

/** Who is asking: the operator, the projects they may see (null: all, an owner), and how. */
export interface Principal {
  operator: OperatorRow;
  projects: string[] | null;
  via: 'session' | 'token';
  /** Never the session id itself. */
  sessionHash: Buffer | null;
  tokenId: string | null;
}

const TOUCH_EVERY_MS = 60_000;

/** A session ends up to this long early, so a quarter of a short idle time, and at most once a minute for long ones. */
const sessionTouchEveryMs = (idleMs: number): number =>
  Math.min(TOUCH_EVERY_MS, Math.floor(idleMs / 4));

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest();

async function principal(
  ctx: OperatorContext,
  operator: OperatorRow,
  via: Principal['via'],
  sessionHash: Buffer | null,
  tokenId: string | null,
): Promise<Principal> {
  return {
    operator,
    projects: operator.role === 'owner' ? null : await operatorProjectIds(ctx.store, operator.id),
    via,
    sessionHash,
    tokenId,
  };
}

export const actingAs = (
  ctx: OperatorContext,
  operator: OperatorRow,
  clientIp: string | null,
): OperatorContext => ({
  ...ctx,
  actor: { operatorId: operator.id, email: operator.email },
  clientIp,
});

/** Unknown email or wrong password: null, after the same work (a dummy hash). The session id is returned once; only its SHA-256 is stored. */
export async function signIn(
  ctx: OperatorContext,
  email: string,
  password: string,
  clientIp: string | null,
): Promise<{ sessionId: string; principal: Principal } | null> {
  const operator = await findOperatorByEmail(ctx.store, email.trim());
  const ok = operator
    ? await verifyPassword(password, operator.password_hash)
    : await verifyAgainstDummy(password);
  if (!operator || !ok) return null;
  const sessionId = randomBytes(32).toString('base64url');
  const idHash = sha256(sessionId);
  const now = ctx.clock.now();
  const stamp = auditStamp(actingAs(ctx, operator, clientIp));
  await write(ctx, {
    type: 'session_start',
    id_hash: idHash.toString('hex'),
    operator_id: operator.id,
    now,
    client_ip: clientIp,
    stamp,
  });
  return { sessionId, principal: await principal(ctx, operator, 'session', idHash, null) };
}

/** `expired` when idle longer than `idleMs`; null when unknown (or its operator is gone). */
export async function sessionPrincipal(
  ctx: OperatorContext,
  sessionId: string,
  idleMs: number,
): Promise<Principal | 'expired' | null> {
  const idHash = sha256(sessionId);
  const session = await findOperatorSession(ctx.store, idHash);
  if (!session) return null;
  const now = ctx.clock.now();
  // Kept, not deleted: every request with its cookie, a reload included, hears why (the janitor prunes it a day later).
  if (now - session.last_seen_at > idleMs) return 'expired';
  const operator = await getOperator(ctx.store, session.operator_id);
  if (!operator) return null;
  if (now - session.last_seen_at >= sessionTouchEveryMs(idleMs))
    await write(ctx, {
      type: 'session_touch',
      id_hash: idHash.toString('hex'),
      now,
      seen: session.last_seen_at,
    });
  return principal(ctx, operator, 'session', idHash, null);
}

export async function signOut(ctx: OperatorContext, p: Principal): Promise<void> {
  if (p.sessionHash === null) return;
  await write(ctx, {
    type: 'session_end',
    id_hash: p.sessionHash.toString('hex'),
    operator_id: p.operator.id,
    stamp: auditStamp(ctx),
  });
}

export async function tokenPrincipal(
  ctx: OperatorContext,
  token: string,
): Promise<Principal | null> {
  if (!TOKEN_PATTERN.test(token)) return null;
  const hash = hashOperatorToken(token);
  const row = await findOperatorTokenByHash(ctx.store, hash);
  const now = ctx.clock.now();
  if (
    !row ||
    !timingSafeEqual(row.token_hash, hash) ||
    row.revoked_at !== null ||
    (row.expires_at !== null && row.expires_at <= now)
  )
    return null;
  const operator = await getOperator(ctx.store, row.operator_id);
  if (!operator) return null;
  if (row.last_used_at === null || now - row.last_used_at >= TOUCH_EVERY_MS)
    await write(ctx, { type: 'token_touch', token_id: row.id, now });
  return principal(ctx, operator, 'token', null, row.id);
}

/** The principal as its authority stands now, for an open stream; reads only, so a stream keeps no session alive. */
export async function currentPrincipal(
  ctx: OperatorContext,
  p: Principal,
  idleMs: number,
): Promise<Principal | null> {
  const now = ctx.clock.now();
  if (p.via === 'session') {
    const session =
      p.sessionHash === null ? undefined : await findOperatorSession(ctx.store, p.sessionHash);
    if (!session || session.operator_id !== p.operator.id || now - session.last_seen_at > idleMs)
      return null;
  } else {
    const row = p.tokenId === null ? undefined : await getOperatorToken(ctx.store, p.tokenId);
    if (
      !row ||
      row.operator_id !== p.operator.id ||
      row.revoked_at !== null ||
      (row.expires_at !== null && row.expires_at <= now)
    )
      return null;
  }
  const operator = await getOperator(ctx.store, p.operator.id);
  return operator ? principal(ctx, operator, p.via, p.sessionHash, p.tokenId) : null;
}

/** An HMAC under the session id: no storage, per session, and not makeable without the cookie. */
export function csrfTokenFor(sessionId: string): string {
  return createHmac('sha256', sessionId).update('postern console csrf v1').digest('base64url');
}

export function csrfTokenMatches(sessionId: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const expected = Buffer.from(csrfTokenFor(sessionId));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** Every other session of theirs ends; their API tokens keep working unless `revokeTokens` (docs/console.md). */
export async function changeOwnPassword(
  ctx: OperatorContext,
  p: Principal,
  current: string,
  next: string,
  revokeTokens = false,
): Promise<PasswordSetResult> {
  checkPasswordRules(next, 'new_password');
  if (!(await verifyPassword(current, p.operator.password_hash)))
    throw new OperatorError(
      'invalid_argument',
      'the current password is wrong',
      'current_password',
    );
  if (next.normalize('NFKC') === current.normalize('NFKC'))
    throw new OperatorError(
      'invalid_argument',
      'the new password must differ from the current one',
      'new_password',
      'unchanged',
    );
  const hash = await hashPassword(next);
  const keep = p.sessionHash === null ? null : p.sessionHash.toString('hex');
  return write(ctx, {
    type: 'password_set',
    operator_id: p.operator.id,
    password_hash: hash,
    now: ctx.clock.now(),
    must_change: false,
    keep_session: keep,
    revoke_tokens: revokeTokens,
    action: 'operator.change_password',
    stamp: auditStamp(ctx),
  });
}
