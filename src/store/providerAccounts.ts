import type { ProviderAccount } from '../contract/providerAccount.js';
import { sql, type Db } from './db.js';
import { cachedPolicyRow } from './policyCache.js';

/** The row as stored: `settings` and `secrets` are JSON text, parsed once when the row is loaded. */
interface ProviderAccountRow extends Omit<ProviderAccount, 'settings' | 'secrets'> {
  settings: string;
  secrets: string;
}

function fromRow(row: ProviderAccountRow): ProviderAccount {
  return { ...row, settings: JSON.parse(row.settings), secrets: JSON.parse(row.secrets) };
}

export function insertProviderAccount(db: Db, account: Omit<ProviderAccount, 'detached_at'>): void {
  sql(
    db,
    `INSERT INTO provider_accounts (id, project_id, slug, settings, secrets, priority, free_quota, created_at)
     VALUES (@id, @project_id, @slug, @settings, @secrets, @priority, @free_quota, @created_at)`,
  ).run({ ...account, settings: JSON.stringify(account.settings), secrets: JSON.stringify(account.secrets) });
}

export function listProviderAccounts(db: Db, projectId: string): ProviderAccount[] {
  const accounts = cachedPolicyRow(db, 'accounts', projectId, () =>
    (sql(db, 'SELECT * FROM provider_accounts WHERE project_id = ? AND detached_at IS NULL ORDER BY priority, created_at').all(projectId) as ProviderAccountRow[]).map(fromRow),
  );
  // A copy: the cached list is shared.
  return [...(accounts ?? [])];
}

/** One account by id, attached or detached. */
export function findProviderAccount(db: Db, id: string): ProviderAccount | undefined {
  const row = sql(db, 'SELECT * FROM provider_accounts WHERE id = ?').get(id) as ProviderAccountRow | undefined;
  return row ? fromRow(row) : undefined;
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

export function setProviderAccountLimits(db: Db, id: string, priority: number, freeQuota: number | null): boolean {
  return sql(db, 'UPDATE provider_accounts SET priority = ?, free_quota = ? WHERE id = ? AND detached_at IS NULL').run(priority, freeQuota, id).changes === 1;
}
