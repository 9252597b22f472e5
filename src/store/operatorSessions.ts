import { sql, type Db } from './db.js';

/** A console session, found by the SHA-256 of its cookie value. */
export interface OperatorSessionRow {
  id_hash: Buffer;
  operator_id: string;
  created_at: number;
  last_seen_at: number;
  client_ip: string | null;
}

export function insertOperatorSession(db: Db, row: OperatorSessionRow): void {
  sql(db, 'INSERT INTO operator_sessions (id_hash, operator_id, created_at, last_seen_at, client_ip) VALUES (@id_hash, @operator_id, @created_at, @last_seen_at, @client_ip)').run(row);
}

export function findOperatorSession(db: Db, idHash: Buffer): OperatorSessionRow | undefined {
  return sql(db, 'SELECT * FROM operator_sessions WHERE id_hash = ?').get(idHash) as OperatorSessionRow | undefined;
}

export function touchOperatorSession(db: Db, idHash: Buffer, now: number): void {
  sql(db, 'UPDATE operator_sessions SET last_seen_at = ? WHERE id_hash = ?').run(now, idHash);
}

export function deleteOperatorSession(db: Db, idHash: Buffer): boolean {
  return sql(db, 'DELETE FROM operator_sessions WHERE id_hash = ?').run(idHash).changes === 1;
}

/** Signs an operator out everywhere, except the session `keep` (its own, after a password change). */
export function deleteOperatorSessions(db: Db, operatorId: string, keep: Buffer | null = null): number {
  return sql(db, 'DELETE FROM operator_sessions WHERE operator_id = ? AND (? IS NULL OR id_hash <> ?)').run(operatorId, keep, keep).changes;
}

/** Sessions idle since before `seenBefore` are gone for good. */
export function pruneOperatorSessions(db: Db, seenBefore: number): number {
  return sql(db, 'DELETE FROM operator_sessions WHERE last_seen_at < ?').run(seenBefore).changes;
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

export function insertOperatorToken(db: Db, row: Omit<OperatorTokenRow, 'last_used_at' | 'revoked_at'>): void {
  sql(
    db,
    `INSERT INTO operator_tokens (id, operator_id, name, token_hash, hint, created_at, expires_at)
     VALUES (@id, @operator_id, @name, @token_hash, @hint, @created_at, @expires_at)`,
  ).run(row);
}

export function findOperatorTokenByHash(db: Db, hash: Buffer): OperatorTokenRow | undefined {
  return sql(db, 'SELECT * FROM operator_tokens WHERE token_hash = ?').get(hash) as OperatorTokenRow | undefined;
}

export function getOperatorToken(db: Db, id: string): OperatorTokenRow | undefined {
  return sql(db, 'SELECT * FROM operator_tokens WHERE id = ?').get(id) as OperatorTokenRow | undefined;
}

export function listOperatorTokens(db: Db, operatorId: string): OperatorTokenRow[] {
  return sql(db, 'SELECT * FROM operator_tokens WHERE operator_id = ? ORDER BY created_at, id').all(operatorId) as OperatorTokenRow[];
}

export function revokeOperatorToken(db: Db, id: string, now: number): boolean {
  return sql(db, 'UPDATE operator_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id).changes === 1;
}

export function touchOperatorToken(db: Db, id: string, now: number): void {
  sql(db, 'UPDATE operator_tokens SET last_used_at = ? WHERE id = ?').run(now, id);
}
