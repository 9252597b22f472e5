import type {
  ProviderAccount,
  ProviderAccountSecrets,
  ProviderAccountSettings,
} from '../contract/providerAccount.js';
import { cachedPolicyRow } from './policyCache.js';
import type { Queries } from './queries.js';

/** The row as stored: `settings` and `secrets` are JSON text, parsed once when the row is loaded. */
interface ProviderAccountRow extends Omit<ProviderAccount, 'settings' | 'secrets'> {
  settings: string;
  secrets: string;
}

function fromRow(row: ProviderAccountRow): ProviderAccount {
  return { ...row, settings: JSON.parse(row.settings), secrets: JSON.parse(row.secrets) };
}

export async function insertProviderAccount(
  q: Queries,
  account: Omit<ProviderAccount, 'detached_at'>,
): Promise<void> {
  await q.run(
    `INSERT INTO provider_accounts (id, project_id, slug, settings, secrets, priority, free_quota, created_at)
     VALUES (@id, @project_id, @slug, @settings, @secrets, @priority, @free_quota, @created_at)`,
    {
      ...account,
      settings: JSON.stringify(account.settings),
      secrets: JSON.stringify(account.secrets),
    },
  );
}

/** `asOf`: see cachedPolicyRow. */
export async function listProviderAccounts(
  q: Queries,
  projectId: string,
  asOf?: number,
): Promise<ProviderAccount[]> {
  const accounts = await cachedPolicyRow(
    q,
    'accounts',
    projectId,
    async () =>
      (
        await q.all<ProviderAccountRow>(
          'SELECT * FROM provider_accounts WHERE project_id = ? AND detached_at IS NULL ORDER BY priority, created_at',
          projectId,
        )
      ).map(fromRow),
    asOf,
  );
  // A copy: the cached list is shared.
  return [...(accounts ?? [])];
}

/** One account by id, attached or detached. */
export async function findProviderAccount(
  q: Queries,
  id: string,
): Promise<ProviderAccount | undefined> {
  const row = await q.get<ProviderAccountRow>('SELECT * FROM provider_accounts WHERE id = ?', id);
  return row ? fromRow(row) : undefined;
}

export async function detachProviderAccount(q: Queries, id: string, now: number): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE provider_accounts SET detached_at = ? WHERE id = ? AND detached_at IS NULL',
      now,
      id,
    )) === 1
  );
}

/** The distinct slugs a project has attached, for routing checks. `asOf`: see cachedPolicyRow. */
export async function attachedSlugs(
  q: Queries,
  projectId: string,
  asOf?: number,
): Promise<ReadonlySet<string>> {
  // Derived from the (cached) attached accounts: one query for the table.
  const slugs = await cachedPolicyRow(
    q,
    'slugs',
    projectId,
    async () => new Set((await listProviderAccounts(q, projectId, asOf)).map((a) => a.slug)),
    asOf,
  );
  return slugs ?? new Set();
}

export async function setProviderAccountLimits(
  q: Queries,
  id: string,
  priority: number,
  freeQuota: number | null,
): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE provider_accounts SET priority = ?, free_quota = ? WHERE id = ? AND detached_at IS NULL',
      priority,
      freeQuota,
      id,
    )) === 1
  );
}

/** Replaces an attached account's settings and secrets (an operator's edit: a new secret replaces the old). */
export async function setProviderAccountConfig(
  q: Queries,
  id: string,
  settings: ProviderAccountSettings,
  secrets: ProviderAccountSecrets,
): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE provider_accounts SET settings = ?, secrets = ? WHERE id = ? AND detached_at IS NULL',
      JSON.stringify(settings),
      JSON.stringify(secrets),
      id,
    )) === 1
  );
}
