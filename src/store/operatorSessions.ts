import { getValue, type Queries } from './queries.js';

export interface OperatorSessionRow {
  id_hash: Buffer;
  operator_id: string;
  created_at: number;
  last_seen_at: number;
  client_ip: string | null;
}

export async function insertOperatorSession(q: Queries, row: OperatorSessionRow): Promise<void> {
  await q.run(
    'INSERT INTO operator_sessions (id_hash, operator_id, created_at, last_seen_at, client_ip) VALUES (@id_hash, @operator_id, @created_at, @last_seen_at, @client_ip)',
    { ...row },
  );
}

export async function findOperatorSession(
  q: Queries,
  idHash: Buffer,
): Promise<OperatorSessionRow | undefined> {
  return q.get<OperatorSessionRow>('SELECT * FROM operator_sessions WHERE id_hash = ?', idHash);
}

/** Only if nothing moved it since: a stale reading never overwrites another node's (or the janitor's) change. */
export async function touchOperatorSession(
  q: Queries,
  idHash: Buffer,
  now: number,
  seen: number,
): Promise<void> {
  await q.run(
    'UPDATE operator_sessions SET last_seen_at = ? WHERE id_hash = ? AND last_seen_at = ?',
    now,
    idHash,
    seen,
  );
}

export async function deleteOperatorSession(q: Queries, idHash: Buffer): Promise<boolean> {
  return (await q.run('DELETE FROM operator_sessions WHERE id_hash = ?', idHash)) === 1;
}

/** Except the session `keep` (its own, after a password change). */
export async function deleteOperatorSessions(
  q: Queries,
  operatorId: string,
  keep: Buffer | null = null,
): Promise<number> {
  if (keep === null)
    return q.run('DELETE FROM operator_sessions WHERE operator_id = ?', operatorId);
  return q.run(
    'DELETE FROM operator_sessions WHERE operator_id = ? AND id_hash <> ?',
    operatorId,
    keep,
  );
}

export async function pruneOperatorSessions(q: Queries, seenBefore: number): Promise<number> {
  return q.run('DELETE FROM operator_sessions WHERE last_seen_at < ?', seenBefore);
}

export interface OperatorTokenRow {
  id: string;
  operator_id: string;
  name: string;
  token_hash: Buffer;
  hint: string;
  created_at: number;
  expires_at: number | null;
  last_used_at: number | null;
  revoked_at: number | null;
}

export async function insertOperatorToken(
  q: Queries,
  row: Omit<OperatorTokenRow, 'last_used_at' | 'revoked_at'>,
): Promise<void> {
  await q.run(
    `INSERT INTO operator_tokens (id, operator_id, name, token_hash, hint, created_at, expires_at)
     VALUES (@id, @operator_id, @name, @token_hash, @hint, @created_at, @expires_at)`,
    row,
  );
}

export async function findOperatorTokenByHash(
  q: Queries,
  hash: Buffer,
): Promise<OperatorTokenRow | undefined> {
  return q.get<OperatorTokenRow>('SELECT * FROM operator_tokens WHERE token_hash = ?', hash);
}

export async function getOperatorToken(
  q: Queries,
  id: string,
): Promise<OperatorTokenRow | undefined> {
  return q.get<OperatorTokenRow>('SELECT * FROM operator_tokens WHERE id = ?', id);
}

export async function listOperatorTokens(
  q: Queries,
  operatorId: string,
): Promise<OperatorTokenRow[]> {
  return q.all<OperatorTokenRow>(
    'SELECT * FROM operator_tokens WHERE operator_id = ? ORDER BY created_at, id',
    operatorId,
  );
}

export async function revokeOperatorToken(q: Queries, id: string, now: number): Promise<boolean> {
  return (
    (await q.run(
      'UPDATE operator_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL',
      now,
      id,
    )) === 1
  );
}

export async function revokeOperatorTokens(
  q: Queries,
  operatorId: string,
  now: number,
): Promise<number> {
  return q.run(
    'UPDATE operator_tokens SET revoked_at = ? WHERE operator_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)',
    now,
    operatorId,
    now,
  );
}

export async function countActiveOperatorTokens(
  q: Queries,
  operatorId: string,
  now: number,
): Promise<number> {
  return (await getValue<number>(
    q,
    'SELECT COUNT(*) FROM operator_tokens WHERE operator_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)',
    operatorId,
    now,
  ))!;
}

export async function touchOperatorToken(q: Queries, id: string, now: number): Promise<void> {
  await q.run('UPDATE operator_tokens SET last_used_at = ? WHERE id = ?', now, id);
}
