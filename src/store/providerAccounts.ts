import { sql, type Db } from './db.js';
import { cachedPolicyRow } from './policyCache.js';

/** The `settings` column, as JSON. */
export interface ProviderAccountSettings {
  host: string | null;
  port: number | null;
  user: string | null;
  tls: 'starttls' | 'implicit' | 'none' | null;
  endpoint: string | null;
  region: string | null;
  /** The sending domain, for APIs addressed per domain (provider-c: Mailgun). */
  domain?: string | null;
  /** The provider's public key that signs its feedback notifications (provider-b: SendGrid's ECDSA key). */
  webhook_public_key?: string | null;
}

/** The `secrets` column, as JSON: needed in clear to authenticate to the provider; never printed. */
export interface ProviderAccountSecrets {
  pass?: string;
  api_key?: string;
  /** Verifies feedback notifications: a signing key (Mailgun, Resend), or the token / basic-auth password in the feedback URL (Postmark, Brevo). */
  webhook_secret?: string;
}

export interface ProviderAccountRow {
  id: string;
  project_id: string;
  slug: string;
  /** JSON: host, port, user, tls, endpoint, region. */
  settings: string;
  /** JSON: pass, api_key. Needed in clear to authenticate to the provider; never printed. */
  secrets: string;
  priority: number;
  free_quota: number | null;
  created_at: number;
  detached_at: number | null;
}

export function insertProviderAccount(db: Db, row: Omit<ProviderAccountRow, 'detached_at'>): void {
  sql(
    db,
    `INSERT INTO provider_accounts (id, project_id, slug, settings, secrets, priority, free_quota, created_at)
     VALUES (@id, @project_id, @slug, @settings, @secrets, @priority, @free_quota, @created_at)`,
  ).run(row);
}

export function listProviderAccounts(db: Db, projectId: string): ProviderAccountRow[] {
  const rows = cachedPolicyRow(
    db,
    'accounts',
    projectId,
    () => sql(db, 'SELECT * FROM provider_accounts WHERE project_id = ? AND detached_at IS NULL ORDER BY priority, created_at').all(projectId) as ProviderAccountRow[],
  );
  // A copy: the cached list is shared.
  return [...(rows ?? [])];
}

export function detachProviderAccount(db: Db, id: string, now: number): boolean {
  return sql(db, 'UPDATE provider_accounts SET detached_at = ? WHERE id = ? AND detached_at IS NULL').run(now, id).changes === 1;
}

/** The distinct slugs a project has attached, for routing checks. */
export function attachedSlugs(db: Db, projectId: string): ReadonlySet<string> {
  // Derived from the (cached) attached accounts: one query for the table.
  const slugs = cachedPolicyRow(db, 'slugs', projectId, () => new Set(listProviderAccounts(db, projectId).map((a) => a.slug)));
  return slugs ?? new Set();
}

/** An attached account by id (a detached one is not found). */
export function getProviderAccount(db: Db, id: string): ProviderAccountRow | undefined {
  return sql(db, 'SELECT * FROM provider_accounts WHERE id = ? AND detached_at IS NULL').get(id) as ProviderAccountRow | undefined;
}

export function setProviderAccountLimits(db: Db, id: string, priority: number, freeQuota: number | null): boolean {
  return sql(db, 'UPDATE provider_accounts SET priority = ?, free_quota = ? WHERE id = ? AND detached_at IS NULL').run(priority, freeQuota, id).changes === 1;
}
