import { getValue, type Queries } from './queries.js';

/** Records when keys were last used; a later time wins, an earlier one changes nothing. */
export async function recordApiKeyUse(
  q: Queries,
  uses: ReadonlyMap<string, number>,
): Promise<void> {
  const upsert = `INSERT INTO api_key_usage (key_id, last_used_at) VALUES (?, ?)
     ON CONFLICT (key_id) DO UPDATE SET last_used_at =
       CASE WHEN excluded.last_used_at > api_key_usage.last_used_at THEN excluded.last_used_at ELSE api_key_usage.last_used_at END`;
  for (const [keyId, at] of uses) await q.run(upsert, keyId, at);
}

export async function apiKeyLastUsed(q: Queries, keyId: string): Promise<number | null> {
  return (
    (await getValue<number>(q, 'SELECT last_used_at FROM api_key_usage WHERE key_id = ?', keyId)) ??
    null
  );
}
