/** tls.acme's shared state on PostgreSQL; a SQLite node keeps it in <state_dir>/certs and memory and leaves these empty. */
import { getValue, type Queries } from './queries.js';

export interface TlsCertificateRow {
  name: string;
  domains: string;
  /** The private key, then the chain (PEM). */
  pem: string;
  not_before: number;
  not_after: number;
  obtained_at: number;
  obtained_by: string;
}

export interface TlsCertificateOrderRow {
  name: string;
  failures: number;
  failed_at: number;
  error: string;
  node_id: string;
}

/** The advisory lock's first key ("PSTC"); its second is hashtext(name). */
export const CERTIFICATE_LOCK_CLASS = 0x50535443;

export function storedTlsCertificate(
  q: Queries,
  name: string,
): Promise<TlsCertificateRow | undefined> {
  return q.get<TlsCertificateRow>(
    'SELECT name, domains, pem, not_before, not_after, obtained_at, obtained_by FROM tls_certificates WHERE name = ?',
    name,
  );
}

/** Unless the stored one lasts longer: a node slow to store never replaces a newer one. True when written. */
export async function saveTlsCertificate(q: Queries, row: TlsCertificateRow): Promise<boolean> {
  const changed = await q.run(
    `INSERT INTO tls_certificates (name, domains, pem, not_before, not_after, obtained_at, obtained_by)
     VALUES (@name, @domains, @pem, @not_before, @not_after, @obtained_at, @obtained_by)
     ON CONFLICT (name) DO UPDATE SET domains = excluded.domains, pem = excluded.pem, not_before = excluded.not_before,
       not_after = excluded.not_after, obtained_at = excluded.obtained_at, obtained_by = excluded.obtained_by
     WHERE tls_certificates.not_after <= excluded.not_after OR tls_certificates.domains <> excluded.domains`,
    { ...row },
  );
  return changed > 0;
}

export function lastFailedOrder(
  q: Queries,
  name: string,
): Promise<TlsCertificateOrderRow | undefined> {
  return q.get<TlsCertificateOrderRow>(
    'SELECT name, failures, failed_at, error, node_id FROM tls_certificate_orders WHERE name = ?',
    name,
  );
}

export async function recordFailedOrder(
  q: Queries,
  name: string,
  error: string,
  at: number,
  nodeId: string,
): Promise<void> {
  await q.run(
    `INSERT INTO tls_certificate_orders (name, failures, failed_at, error, node_id) VALUES (?, 1, ?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET failures = tls_certificate_orders.failures + 1, failed_at = excluded.failed_at, error = excluded.error, node_id = excluded.node_id`,
    name,
    at,
    error,
    nodeId,
  );
}

export async function clearFailedOrders(q: Queries, name: string): Promise<void> {
  await q.run('DELETE FROM tls_certificate_orders WHERE name = ?', name);
}

/** Nodes ordering the same certificate take turns; `work` writes through the pool, so what it stores is visible before the lock goes. */
export async function whileHoldingCertificateLock<T>(
  q: Queries,
  name: string,
  work: () => Promise<T>,
): Promise<T> {
  if (q.dialect !== 'postgres')
    throw new Error(
      'the certificate lock is a PostgreSQL advisory lock; one SQLite node orders alone',
    );
  return q.transaction(async (tx) => {
    await tx.get(
      'SELECT pg_advisory_xact_lock(CAST(? AS INTEGER), hashtext(?))',
      CERTIFICATE_LOCK_CLASS,
      name,
    );
    return work();
  });
}

/** Nodes racing on an empty table all get the first one written. */
export async function acmeAccountKey(
  q: Queries,
  directoryUrl: string,
  candidate: () => Promise<string>,
  now: number,
): Promise<string> {
  const stored = await getValue<string>(
    q,
    'SELECT private_key FROM acme_accounts WHERE directory_url = ?',
    directoryUrl,
  );
  if (stored) return stored;
  await q.run(
    'INSERT INTO acme_accounts (directory_url, private_key, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
    directoryUrl,
    await candidate(),
    now,
  );
  const written = await getValue<string>(
    q,
    'SELECT private_key FROM acme_accounts WHERE directory_url = ?',
    directoryUrl,
  );
  if (!written) throw new Error('acme_accounts: no row after inserting one');
  return written;
}

export interface AcmeChallengeRow {
  token: string;
  kind: 'http-01' | 'tls-alpn-01';
  domain: string;
  key_authorization: string;
  expires_at: number;
}

export async function putAcmeChallenge(q: Queries, row: AcmeChallengeRow): Promise<void> {
  await q.run(
    `INSERT INTO acme_challenges (token, kind, domain, key_authorization, expires_at) VALUES (@token, @kind, @domain, @key_authorization, @expires_at)
     ON CONFLICT (token) DO UPDATE SET kind = excluded.kind, domain = excluded.domain, key_authorization = excluded.key_authorization, expires_at = excluded.expires_at`,
    { ...row },
  );
}

/** Removes the challenge, and any other whose time is over. */
export async function removeAcmeChallenge(q: Queries, token: string, now: number): Promise<void> {
  await q.run('DELETE FROM acme_challenges WHERE token = ? OR expires_at <= ?', token, now);
}

export function httpChallengeAnswer(
  q: Queries,
  token: string,
  now: number,
): Promise<string | undefined> {
  return getValue<string>(
    q,
    "SELECT key_authorization FROM acme_challenges WHERE token = ? AND kind = 'http-01' AND expires_at > ?",
    token,
    now,
  );
}

export function alpnChallengeAnswer(
  q: Queries,
  domain: string,
  now: number,
): Promise<string | undefined> {
  return getValue<string>(
    q,
    "SELECT key_authorization FROM acme_challenges WHERE domain = ? AND kind = 'tls-alpn-01' AND expires_at > ? ORDER BY expires_at DESC LIMIT 1",
    domain,
    now,
  );
}
