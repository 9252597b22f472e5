import { createHash } from 'node:crypto';
import { isEmail } from '../contract/address.js';
import { newOperatorId, newOperatorTokenId, randomAlphanumeric } from '../ids.js';
import { credentialState } from '../policy/apiKeys.js';
import {
  getOperatorToken,
  listOperatorTokens,
  type OperatorTokenRow,
} from '../store/operatorSessions.js';
import {
  getOperator,
  listOperators,
  type OperatorRole,
  type OperatorRow,
  operatorProjectIds,
} from '../store/operators.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { parseExpiry } from './keys.js';
import { checkPasswordRules, generatePassword, hashPassword } from './passwords.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

export const OPERATOR_ROLES: readonly OperatorRole[] = ['owner', 'member'];

export interface OperatorView {
  id: string;
  email: string;
  role: OperatorRole;
  projects: string[];
  created_at: string;
  password_changed_at: string;
  /** Generated (create, reset-password): until changed, the console allows nothing else. */
  must_change_password: boolean;
}

export async function operatorView(ctx: OperatorContext, row: OperatorRow): Promise<OperatorView> {
  return {
    id: row.id,
    email: row.email,
    role: row.role,
    projects: row.role === 'owner' ? [] : await operatorProjectIds(ctx.store, row.id),
    created_at: iso(row.created_at)!,
    password_changed_at: iso(row.password_changed_at)!,
    must_change_password: row.must_change_password === 1,
  };
}

export async function requireOperator(ctx: OperatorContext, id: string): Promise<OperatorRow> {
  const row = await getOperator(ctx.store, id);
  if (!row) throw notFound('operator', id);
  return row;
}

function checkRole(role: string): OperatorRole {
  if (!OPERATOR_ROLES.includes(role as OperatorRole))
    throw new OperatorError('invalid_argument', '--role must be owner or member', 'role');
  return role as OperatorRole;
}

async function checkProjects(
  ctx: OperatorContext,
  role: OperatorRole,
  projects: readonly string[],
): Promise<string[]> {
  if (role === 'owner' && projects.length > 0)
    throw new OperatorError(
      'invalid_argument',
      'an owner sees every project; --project is for members',
      'projects',
    );
  for (const id of projects) await requireProject(ctx, id);
  return [...new Set(projects)];
}

export interface CreateOperatorOptions {
  email: string;
  role: string;
  projects?: readonly string[];
  /** Read from standard input; absent: a one-time password is generated and returned once. */
  password?: string;
}

/** The password is returned only when generated, and only here; it must be changed at the first sign-in. */
export async function createOperator(
  ctx: OperatorContext,
  opts: CreateOperatorOptions,
): Promise<OperatorView & { password?: string }> {
  const email = opts.email.trim();
  if (!isEmail(email))
    throw new OperatorError('invalid_argument', `"${opts.email}" is not an email address`, 'email');
  const role = checkRole(opts.role);
  const projects = await checkProjects(ctx, role, opts.projects ?? []);
  if (opts.password !== undefined) checkPasswordRules(opts.password);
  const password = opts.password ?? generatePassword();
  const hash = await hashPassword(password);
  const id = newOperatorId();
  const now = ctx.clock.now();
  const row = {
    id,
    email,
    role,
    password_hash: hash,
    created_at: now,
    password_changed_at: now,
    must_change_password: opts.password === undefined ? 1 : 0,
  };
  await write(ctx, { type: 'operator_create', row, projects, stamp: auditStamp(ctx) });
  const view = await operatorView(ctx, await requireOperator(ctx, id));
  return opts.password === undefined ? { ...view, password } : view;
}

export async function operatorList(ctx: OperatorContext): Promise<{ operators: OperatorView[] }> {
  return {
    operators: await Promise.all((await listOperators(ctx.store)).map((r) => operatorView(ctx, r))),
  };
}

/** The last owner stays: someone must be able to manage the rest. */
export async function removeOperator(
  ctx: OperatorContext,
  id: string,
): Promise<{ id: string; removed: true }> {
  await write(ctx, { type: 'operator_remove', id, stamp: auditStamp(ctx) });
  return { id, removed: true };
}

export async function updateOperator(
  ctx: OperatorContext,
  id: string,
  changes: { role?: string; projects?: readonly string[] },
): Promise<OperatorView> {
  const row = await requireOperator(ctx, id);
  const role = changes.role === undefined ? null : checkRole(changes.role);
  const projects =
    changes.projects === undefined
      ? null
      : await checkProjects(ctx, role ?? row.role, changes.projects);
  await write(ctx, { type: 'operator_update', id, role, projects, stamp: auditStamp(ctx) });
  return operatorView(ctx, await requireOperator(ctx, id));
}

export interface PasswordResetView {
  id: string;
  email: string;
  password?: string;
  sessions_ended: number;
  tokens_revoked: number;
}

/** Every session ends and, unless `keepTokens`, every API token is revoked: a reset takes an account back. */
export async function resetOperatorPassword(
  ctx: OperatorContext,
  id: string,
  password?: string,
  opts: { keepTokens?: boolean } = {},
): Promise<PasswordResetView> {
  const row = await requireOperator(ctx, id);
  if (password !== undefined) checkPasswordRules(password);
  const chosen = password ?? generatePassword();
  const hash = await hashPassword(chosen);
  const done = await write(ctx, {
    type: 'password_set',
    operator_id: id,
    password_hash: hash,
    now: ctx.clock.now(),
    must_change: password === undefined,
    keep_session: null,
    revoke_tokens: opts.keepTokens !== true,
    action: 'operator.reset_password',
    stamp: auditStamp(ctx),
  });
  return {
    id,
    email: row.email,
    ...(password === undefined ? { password: chosen } : {}),
    sessions_ended: done.sessions_ended,
    tokens_revoked: done.tokens_revoked,
  };
}

export const TOKEN_PATTERN = /^pso_[A-Za-z0-9]{40}$/;

/** About 238 random bits: a single SHA-256 is a sound verifier. */
export const hashOperatorToken = (token: string): Buffer =>
  createHash('sha256').update(token, 'utf8').digest();

export interface OperatorTokenView {
  id: string;
  operator_id: string;
  name: string;
  hint: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
  state: 'active' | 'expired' | 'revoked';
}

export function tokenView(ctx: OperatorContext, t: OperatorTokenRow): OperatorTokenView {
  const state = credentialState(t, ctx.clock.now());
  return {
    id: t.id,
    operator_id: t.operator_id,
    name: t.name,
    hint: t.hint,
    created_at: iso(t.created_at)!,
    expires_at: iso(t.expires_at),
    last_used_at: iso(t.last_used_at),
    revoked_at: iso(t.revoked_at),
    state,
  };
}

/** Returned here once; only its SHA-256 is stored. */
export async function createOperatorToken(
  ctx: OperatorContext,
  operatorId: string,
  name: string,
  expires?: string,
): Promise<OperatorTokenView & { token: string }> {
  await requireOperator(ctx, operatorId);
  const label = name.trim();
  if (label === '' || label.length > 100)
    throw new OperatorError(
      'invalid_argument',
      'the token name must be 1 to 100 characters',
      'name',
    );
  const expiresAt = parseExpiry(ctx, expires);
  const token = `pso_${randomAlphanumeric(40)}`;
  const id = newOperatorTokenId();
  const row = {
    id,
    operator_id: operatorId,
    name: label,
    token_hash: hashOperatorToken(token).toString('hex'),
    hint: `pso_…${token.slice(-4)}`,
    created_at: ctx.clock.now(),
    expires_at: expiresAt,
  };
  await write(ctx, { type: 'token_create', row, stamp: auditStamp(ctx) });
  return { ...tokenView(ctx, (await getOperatorToken(ctx.store, id))!), token };
}

export async function requireOperatorToken(
  ctx: OperatorContext,
  id: string,
): Promise<OperatorTokenRow> {
  const row = await getOperatorToken(ctx.store, id);
  if (!row) throw notFound('token', id);
  return row;
}

export async function revokeOperatorTokenById(
  ctx: OperatorContext,
  id: string,
): Promise<OperatorTokenView> {
  await write(ctx, { type: 'token_revoke', id, now: ctx.clock.now(), stamp: auditStamp(ctx) });
  return tokenView(ctx, await requireOperatorToken(ctx, id));
}

export async function operatorTokens(
  ctx: OperatorContext,
  operatorId: string,
): Promise<{ tokens: OperatorTokenView[] }> {
  await requireOperator(ctx, operatorId);
  return {
    tokens: (await listOperatorTokens(ctx.store, operatorId)).map((t) => tokenView(ctx, t)),
  };
}
