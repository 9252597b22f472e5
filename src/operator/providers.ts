import type {
  ProviderAccount,
  ProviderAccountSecrets,
  ProviderAccountSettings,
} from '../contract/providerAccount.js';
import { newProviderAccountId } from '../ids.js';
import { ACCOUNT_FIELDS, type AccountFieldName } from '../providers/accountFields.js';
import { type ConnectionCheck, checkConnection } from '../providers/connectionCheck.js';
import {
  DECLARED_SLUGS,
  declaredSlug,
  feedbackUrlCarriesSecret,
  feedbackVerifierFor,
  vendorOf,
} from '../providers/registry.js';
import { findProviderAccount, listProviderAccounts } from '../store/providerAccounts.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { configuredViewerBase } from './messageLinks.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

export const PROVIDER_SLUGS: readonly string[] = DECLARED_SLUGS.map((s) => s.slug);

export interface AttachOptions {
  slug: string;
  host?: string;
  port?: string;
  user?: string;
  pass?: string;
  tls?: string;
  endpoint?: string;
  apiKey?: string;
  region?: string;
  domain?: string;
  webhookSecret?: string;
  webhookPublicKey?: string;
  label?: string;
  freeQuota?: string;
  priority?: string;
}

/** `label: null` clears it; secrets are replaced, never read back. */
export interface ProviderChanges {
  priority?: string;
  freeQuota?: string | null;
  label?: string | null;
  user?: string;
  pass?: string;
  apiKey?: string;
  webhookSecret?: string;
  webhookPublicKey?: string;
}

export const ATTACH_OPTION: Record<
  AccountFieldName,
  Exclude<keyof AttachOptions, 'slug' | 'freeQuota' | 'priority'>
> = {
  host: 'host',
  port: 'port',
  user: 'user',
  pass: 'pass',
  tls: 'tls',
  endpoint: 'endpoint',
  api_key: 'apiKey',
  region: 'region',
  domain: 'domain',
  webhook_secret: 'webhookSecret',
  webhook_public_key: 'webhookPublicKey',
};

export interface ProviderAccountView extends ProviderAccountSettings {
  id: string;
  project_id: string;
  slug: string;
  vendor: string;
  label: string | null;
  priority: number;
  free_quota: number | null;
  credentials: { pass: boolean; api_key: boolean; webhook_secret: boolean };
  feedback_path: string;
  /** null: the provider sends none, or no HTTP listener. A secret in the URL shows only in the answer that set it, like an API key. */
  feedback_url: string | null;
  created_at: string;
}

const MASK = '••••••••';

function feedbackUrl(ctx: OperatorContext, row: ProviderAccount, reveal: boolean): string | null {
  const base = configuredViewerBase(ctx.config);
  if (!base || !feedbackVerifierFor(row.slug)) return null;
  const url = `${base.replace(/\/+$/, '')}/v1/feedback/${row.id}`;
  const secret = row.secrets.webhook_secret;
  if (!feedbackUrlCarriesSecret(row.slug) || !secret) return url;
  return `${url}/${reveal ? encodeURIComponent(secret) : MASK}`;
}

function view(
  ctx: OperatorContext,
  row: ProviderAccount,
  revealFeedbackSecret = false,
): ProviderAccountView {
  const { settings, secrets } = row;
  return {
    id: row.id,
    project_id: row.project_id,
    slug: row.slug,
    vendor: vendorOf(row.slug),
    ...settings,
    label: settings.label ?? null,
    priority: row.priority,
    free_quota: row.free_quota,
    credentials: {
      pass: Boolean(secrets.pass),
      api_key: Boolean(secrets.api_key),
      webhook_secret: Boolean(secrets.webhook_secret),
    },
    feedback_path: `/v1/feedback/${row.id}`,
    feedback_url: feedbackUrl(ctx, row, revealFeedbackSecret),
    created_at: iso(row.created_at)!,
  };
}

function integer(name: string, value: string | undefined, min: number, max: number): number | null {
  if (value === undefined) return null;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max)
    throw new OperatorError(
      'invalid_argument',
      `--${name} must be an integer from ${min} to ${max}`,
      name.replace(/-/g, '_'),
    );
  return n;
}

export async function attachProvider(
  ctx: OperatorContext,
  projectId: string,
  opts: AttachOptions,
): Promise<ProviderAccountView> {
  await requireProject(ctx, projectId);
  const declared = declaredSlug(opts.slug);
  if (!declared)
    throw new OperatorError(
      'invalid_argument',
      `unknown provider slug "${opts.slug}" (one of: ${PROVIDER_SLUGS.join(', ')})`,
      'slug',
    );
  for (const name of declared.account.required) {
    if (!opts[ATTACH_OPTION[name]]) {
      const field = ACCOUNT_FIELDS.find((f) => f.name === name);
      throw new OperatorError(
        'invalid_argument',
        `${opts.slug} needs ${field?.flag ?? name} (${declared.account.properties[name]?.title ?? name})`,
        name,
      );
    }
  }
  if (opts.tls !== undefined && !['starttls', 'implicit', 'none'].includes(opts.tls))
    throw new OperatorError('invalid_argument', '--tls must be starttls, implicit or none', 'tls');
  if (opts.endpoint !== undefined) {
    let url: URL;
    try {
      url = new URL(opts.endpoint);
    } catch {
      throw new OperatorError('invalid_argument', '--endpoint must be an absolute URL', 'endpoint');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      throw new OperatorError('invalid_argument', '--endpoint must be an http(s) URL', 'endpoint');
  }
  const settings: ProviderAccountSettings = {
    host: opts.host ?? null,
    port: integer('port', opts.port, 1, 65535),
    user: opts.user ?? null,
    tls: (opts.tls as ProviderAccountSettings['tls']) ?? null,
    endpoint: opts.endpoint ?? null,
    region: opts.region ?? null,
    domain: opts.domain ?? null,
    webhook_public_key: opts.webhookPublicKey ?? null,
    label: label(opts.label) ?? null,
  };
  const secrets: ProviderAccountSecrets = {};
  if (opts.pass !== undefined) secrets.pass = opts.pass;
  if (opts.apiKey !== undefined) secrets.api_key = opts.apiKey;
  if (opts.webhookSecret !== undefined) secrets.webhook_secret = opts.webhookSecret;
  const id = newProviderAccountId();
  const row = {
    id,
    project_id: projectId,
    slug: opts.slug,
    settings,
    secrets,
    priority: integer('priority', opts.priority, 0, 1_000_000) ?? 100,
    free_quota: integer('free-quota', opts.freeQuota, 0, Number.MAX_SAFE_INTEGER),
    created_at: ctx.clock.now(),
  };
  await write(ctx, { type: 'provider_attach', row, stamp: auditStamp(ctx) });
  return view(ctx, await requireProviderAccount(ctx, id), true);
}

/** Trimmed, empty is none, at most 100 characters. */
function label(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value;
  const trimmed = value.trim();
  if (trimmed.length > 100)
    throw new OperatorError('invalid_argument', '--label is at most 100 characters', 'label');
  return trimmed === '' ? null : trimmed;
}

export async function listProviders(
  ctx: OperatorContext,
  projectId: string,
): Promise<{ providers: ProviderAccountView[] }> {
  await requireProject(ctx, projectId);
  return {
    providers: (await listProviderAccounts(ctx.store, projectId)).map((row) => view(ctx, row)),
  };
}

export async function detachProvider(
  ctx: OperatorContext,
  id: string,
): Promise<{ id: string; detached: true }> {
  await write(ctx, { type: 'provider_detach', id, now: ctx.clock.now(), stamp: auditStamp(ctx) });
  return { id, detached: true };
}

export async function requireProviderAccount(
  ctx: OperatorContext,
  id: string,
): Promise<ProviderAccount> {
  const row = await findProviderAccount(ctx.store, id);
  if (!row || row.detached_at !== null) throw notFound('provider account', id);
  return row;
}

/** Priority: fallback order, lowest first; free quota: free-first, null none. */
export async function updateProvider(
  ctx: OperatorContext,
  id: string,
  changes: ProviderChanges,
): Promise<ProviderAccountView> {
  const priority = integer('priority', changes.priority, 0, 1_000_000);
  const freeQuota =
    changes.freeQuota === null
      ? null
      : integer('free-quota', changes.freeQuota, 0, Number.MAX_SAFE_INTEGER);
  const settings: Partial<ProviderAccountSettings> = {};
  const newLabel = label(changes.label);
  if (newLabel !== undefined) settings.label = newLabel;
  if (changes.user !== undefined) settings.user = changes.user;
  if (changes.webhookPublicKey !== undefined)
    settings.webhook_public_key = changes.webhookPublicKey;
  const secrets: ProviderAccountSecrets = {};
  for (const [name, value] of [
    ['pass', changes.pass],
    ['api_key', changes.apiKey],
    ['webhook_secret', changes.webhookSecret],
  ] as const) {
    if (value === undefined) continue;
    if (value === '')
      throw new OperatorError('invalid_argument', `a new ${name} cannot be empty`, name);
    secrets[name] = value;
  }
  await write(ctx, {
    type: 'provider_update',
    id,
    priority,
    ...(changes.freeQuota === undefined ? {} : { free_quota: freeQuota }),
    settings,
    secrets,
    stamp: auditStamp(ctx),
  });
  // A replaced webhook secret is in this answer's feedback URL, once.
  return view(ctx, await requireProviderAccount(ctx, id), changes.webhookSecret !== undefined);
}

/** Sends nothing and changes nothing, so it is not audited. */
export async function checkProvider(
  ctx: OperatorContext,
  id: string,
): Promise<ConnectionCheck & { id: string; slug: string }> {
  const row = await requireProviderAccount(ctx, id);
  const result = await checkConnection(row, declaredSlug(row.slug), {
    timeoutMs: Math.min(
      ctx.config.delivery.smtp_timeout_ms,
      ctx.config.delivery.api_timeout_ms,
      15_000,
    ),
    now: ctx.clock.now(),
  });
  return { id, slug: row.slug, ...result };
}
