import { sql, type Db } from './db.js';
import { cachedPolicyRow } from './policyCache.js';

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
export function storeDkimKey(db: Db, row: Omit<DkimKeyRow, 'removed_at'>): { replaced: string | null } {
  return db
    .transaction(() => {
      const previous = activeDkimKey(db, row.project_id, row.domain);
      if (previous) sql(db, 'UPDATE dkim_keys SET removed_at = ? WHERE id = ? AND removed_at IS NULL').run(row.created_at, previous.id);
      sql(
        db,
        `INSERT INTO dkim_keys (id, project_id, domain, selector, algorithm, private_key, public_key, created_at)
         VALUES (@id, @project_id, @domain, @selector, @algorithm, @private_key, @public_key, @created_at)`,
      ).run(row);
      return { replaced: previous?.id ?? null };
    })
    .immediate();
}

export function activeDkimKey(db: Db, projectId: string, domain: string): DkimKeyRow | undefined {
  return sql(db, 'SELECT * FROM dkim_keys WHERE project_id = ? AND domain = ? AND removed_at IS NULL').get(projectId, domain) as DkimKeyRow | undefined;
}

/**
 * The project's active key for the first of `domains` that has one, looked up for `fromDomain`
 * and remembered under it with the other policy rows (policyCache.ts), a miss included: most
 * messages are not signed.
 */
export function cachedDkimKey(db: Db, projectId: string, fromDomain: string, domains: string[]): DkimKeyRow | undefined {
  const found = cachedPolicyRow(db, 'dkim', `${projectId}\u0000${fromDomain}`, () => {
    for (const domain of domains) {
      const row = activeDkimKey(db, projectId, domain);
      if (row) return row;
    }
    return null;
  });
  return found ?? undefined;
}

export function getDkimKey(db: Db, id: string): DkimKeyRow | undefined {
  return sql(db, 'SELECT * FROM dkim_keys WHERE id = ?').get(id) as DkimKeyRow | undefined;
}

/** The project's active keys, by domain. */
export function listDkimKeys(db: Db, projectId: string): DkimKeyRow[] {
  return sql(db, 'SELECT * FROM dkim_keys WHERE project_id = ? AND removed_at IS NULL ORDER BY domain, created_at').all(projectId) as DkimKeyRow[];
}

/** Retires an active key; false when there is no such active key. */
export function removeDkimKey(db: Db, id: string, now: number): boolean {
  return sql(db, 'UPDATE dkim_keys SET removed_at = ? WHERE id = ? AND removed_at IS NULL').run(now, id).changes === 1;
}
