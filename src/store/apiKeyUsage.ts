import { sql, type Db } from './db.js';

/** Records when keys were last used; a later time wins, an earlier one changes nothing. */
export function recordApiKeyUse(db: Db, uses: ReadonlyMap<string, number>): void {
  const upsert = sql(
    db,
    `INSERT INTO api_key_usage (key_id, last_used_at) VALUES (?, ?)
     ON CONFLICT (key_id) DO UPDATE SET last_used_at = MAX(last_used_at, excluded.last_used_at)`,
  );
  for (const [keyId, at] of uses) upsert.run(keyId, at);
}

export function apiKeyLastUsed(db: Db, keyId: string): number | null {
  return (sql(db, 'SELECT last_used_at FROM api_key_usage WHERE key_id = ?').pluck().get(keyId) as number | undefined) ?? null;
}
