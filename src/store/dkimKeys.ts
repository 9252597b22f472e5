import { cachedPolicyRow } from './policyCache.js';
import type { Queries } from './queries.js';

/** A project's DKIM key for one domain. Private keys live in the index (state dir 0700) and are never logged or printed. */
export interface DkimKeyRow {
  id: string;
  project_id: string;
  domain: string;
  selector: string;
  algorithm: 'rsa-sha256' | 'ed25519-sha256';
  /** PKCS#8 PEM. Secret: never printed, never logged. */
  private_key: string;
  /** SPKI PEM. */
  public_key: string;
  created_at: number;
  removed_at: number | null;
}

/** Stores a key as the project's active one for its domain, retiring the previous one (atomic). */
export async function storeDkimKey(
  q: Queries,
  row: Omit<DkimKeyRow, 'removed_at'>,
): Promise<{ replaced: string | null }> {
  return q.transaction(async (tx) => {
    const previous = await activeDkimKey(tx, row.project_id, row.domain);
    if (previous)
      await tx.run(
        'UPDATE dkim_keys SET removed_at = ? WHERE id = ? AND removed_at IS NULL',
        row.created_at,
        previous.id,
      );
    await tx.run(
      `INSERT INTO dkim_keys (id, project_id, domain, selector, algorithm, private_key, public_key, created_at)
         VALUES (@id, @project_id, @domain, @selector, @algorithm, @private_key, @public_key, @created_at)`,
      row,
    );
    return { replaced: previous?.id ?? null };
  });
}

export async function activeDkimKey(
  q: Queries,
  projectId: string,
  domain: string,
): Promise<DkimKeyRow | undefined> {
  return q.get<DkimKeyRow>(
    'SELECT * FROM dkim_keys WHERE project_id = ? AND domain = ? AND removed_at IS NULL',
    projectId,
    domain,
  );
}

/**
 * The project's active key for the first of `domains` that has one, looked up for `fromDomain`
 * and remembered under it with the other policy rows (policyCache.ts), a miss included: most
 * messages are not signed.
 */
export async function cachedDkimKey(
  q: Queries,
  projectId: string,
  fromDomain: string,
  domains: string[],
): Promise<DkimKeyRow | undefined> {
  const found = await cachedPolicyRow(q, 'dkim', `${projectId}\u0000${fromDomain}`, async () => {
    for (const domain of domains) {
      const row = await activeDkimKey(q, projectId, domain);
      if (row) return row;
    }
    return null;
  });
  return found ?? undefined;
}

export async function getDkimKey(q: Queries, id: string): Promise<DkimKeyRow | undefined> {
  return q.get<DkimKeyRow>('SELECT * FROM dkim_keys WHERE id = ?', id);
}

/** The project's active keys, by domain. */
export async function listDkimKeys(q: Queries, projectId: string): Promise<DkimKeyRow[]> {
  return q.all<DkimKeyRow>(
    'SELECT * FROM dkim_keys WHERE project_id = ? AND removed_at IS NULL ORDER BY domain, created_at',
    projectId,
  );
}

/** Retires an active key; false when there is no such active key. */
export async function removeDkimKey(q: Queries, id: string, now: number): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE dkim_keys SET removed_at = ? WHERE id = ? AND removed_at IS NULL',
      now,
      id,
    )) === 1
  );
}

/** The active keys of `domain` in every project not deleted (a domain check that names no project). */
export async function activeDkimKeysOfDomain(q: Queries, domain: string): Promise<DkimKeyRow[]> {
  return q.all<DkimKeyRow>(
    `SELECT k.* FROM dkim_keys k JOIN projects p ON p.id = k.project_id
      WHERE k.domain = ? AND k.removed_at IS NULL AND p.deleted_at IS NULL ORDER BY k.project_id, k.created_at`,
    domain,
  );
}
