import type { ProviderAccount, ProviderAccountSecrets, ProviderAccountSettings } from '../contract/providerAccount.js';
import { openapiDocument } from '../contract/validators.js';
import { newProviderAccountId } from '../ids.js';
import { detachProviderAccount, findProviderAccount, insertProviderAccount, listProviderAccounts } from '../store/providerAccounts.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';

export const PROVIDER_SLUGS = openapiDocument.components.schemas.ProviderSlug.enum as string[];

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
  freeQuota?: string;
  priority?: string;
}



export interface ProviderAccountView extends ProviderAccountSettings {
  id: string;
  project_id: string;
  slug: string;
  priority: number;
  free_quota: number | null;
  credentials: { pass: boolean; api_key: boolean; webhook_secret: boolean };
  /** Where this account's provider posts its delivery/bounce/complaint notifications (append to the public base URL). */
  feedback_path: string;
  created_at: string;
}

function view(row: ProviderAccount): ProviderAccountView {
  const { settings, secrets } = row;
  return {
    id: row.id,
    project_id: row.project_id,
    slug: row.slug,
    ...settings,
    priority: row.priority,
    free_quota: row.free_quota,
    credentials: { pass: Boolean(secrets.pass), api_key: Boolean(secrets.api_key), webhook_secret: Boolean(secrets.webhook_secret) },
    feedback_path: `/v1/feedback/${row.id}`,
    created_at: iso(row.created_at)!,
  };
}

function integer(name: string, value: string | undefined, min: number, max: number): number | null {
  if (value === undefined) return null;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) throw new OperatorError('invalid_argument', `--${name} must be an integer from ${min} to ${max}`);
  return n;
}

/** Stores a provider account; delivery through it is the scheduler's job. */
export function attachProvider(ctx: OperatorContext, projectId: string, opts: AttachOptions): ProviderAccountView {
  requireProject(ctx, projectId);
  if (!PROVIDER_SLUGS.includes(opts.slug)) throw new OperatorError('invalid_argument', `unknown provider slug "${opts.slug}" (one of: ${PROVIDER_SLUGS.join(', ')})`);
  const isApi = opts.slug.endsWith('-api');
  if (opts.slug === 'smtp' && !opts.host) throw new OperatorError('invalid_argument', 'the smtp provider needs --host');
  if (isApi && !opts.apiKey) throw new OperatorError('invalid_argument', `${opts.slug} needs --api-key`);
  if (opts.tls !== undefined && !['starttls', 'implicit', 'none'].includes(opts.tls)) throw new OperatorError('invalid_argument', '--tls must be starttls, implicit or none');
  if (opts.endpoint !== undefined) {
    let url: URL;
    try {
      url = new URL(opts.endpoint);
    } catch {
      throw new OperatorError('invalid_argument', '--endpoint must be an absolute URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new OperatorError('invalid_argument', '--endpoint must be an http(s) URL');
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
  };
  if (opts.slug === 'provider-c-api' && !opts.domain) throw new OperatorError('invalid_argument', 'provider-c-api needs --domain (the sending domain of the account)');
  const secrets: ProviderAccountSecrets = {};
  if (opts.pass !== undefined) secrets.pass = opts.pass;
  if (opts.apiKey !== undefined) secrets.api_key = opts.apiKey;
  if (opts.webhookSecret !== undefined) secrets.webhook_secret = opts.webhookSecret;
  const id = newProviderAccountId();
  insertProviderAccount(ctx.db, {
    id,
    project_id: projectId,
    slug: opts.slug,
    settings,
    secrets,
    priority: integer('priority', opts.priority, 0, 1_000_000) ?? 100,
    free_quota: integer('free-quota', opts.freeQuota, 0, Number.MAX_SAFE_INTEGER),
    created_at: ctx.clock.now(),
  });
  return view(findProviderAccount(ctx.db, id)!);
}

export function listProviders(ctx: OperatorContext, projectId: string): { providers: ProviderAccountView[] } {
  requireProject(ctx, projectId);
  return { providers: listProviderAccounts(ctx.db, projectId).map(view) };
}

export function detachProvider(ctx: OperatorContext, id: string): { id: string; detached: true } {
  if (!detachProviderAccount(ctx.db, id, ctx.clock.now())) throw notFound('provider account', id);
  return { id, detached: true };
}
