import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { sql, type Db } from '../store/db.js';

/**
 * DKIM keys: generation, import, the DNS TXT record, and their rows in `dkim_keys`.
 * Private keys live in the index (state dir 0700) and are never logged or printed.
 */

export type DkimAlgorithm = 'rsa-sha256' | 'ed25519-sha256';

export interface DkimKeyRow {
  id: string;
  project_id: string;
  domain: string;
  selector: string;
  algorithm: DkimAlgorithm;
  /** PKCS#8 PEM. Secret: never printed, never logged. */
  private_key: string;
  /** SPKI PEM. */
  public_key: string;
  created_at: number;
  removed_at: number | null;
}

export interface DkimKeyPair {
  algorithm: DkimAlgorithm;
  privateKey: string;
  publicKey: string;
}

/** The smallest RSA key a verifier must accept (RFC 8301 §3.2). */
export const MIN_RSA_BITS = 1024;

export class DkimKeyError extends Error {}

// Crockford base32, lower case, as in src/ids.ts.
const B32 = '0123456789abcdefghjkmnpqrstvwxyz';

export function newDkimKeyId(): string {
  const bytes = randomBytes(16);
  let out = 'dk.';
  for (let i = 0; i < 16; i++) out += B32[bytes[i] & 31];
  return out;
}

function pair(algorithm: DkimAlgorithm, privateKey: KeyObject): DkimKeyPair {
  return {
    algorithm,
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    publicKey: createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }) as string,
  };
}

/** A fresh key pair: RSA 2048 (the default) or Ed25519 (RFC 8463). */
export function generateDkimKeyPair(kind: 'rsa' | 'ed25519' = 'rsa'): DkimKeyPair {
  if (kind === 'ed25519') return pair('ed25519-sha256', generateKeyPairSync('ed25519').privateKey);
  return pair('rsa-sha256', generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey);
}

/**
 * An operator's own private key (PEM: PKCS#8, or PKCS#1 for RSA; unencrypted), normalised to
 * PKCS#8 with its SPKI public key. Error messages never quote the key.
 */
export function importDkimPrivateKey(pem: string | Buffer): DkimKeyPair {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw new DkimKeyError(`not a usable unencrypted PEM private key${code ? ` (${code})` : ''}`);
  }
  if (key.asymmetricKeyType === 'ed25519') return pair('ed25519-sha256', key);
  if (key.asymmetricKeyType === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS) throw new DkimKeyError(`RSA key of ${bits} bits is too short (at least ${MIN_RSA_BITS})`);
    return pair('rsa-sha256', key);
  }
  throw new DkimKeyError(`unsupported key type "${key.asymmetricKeyType}" (rsa or ed25519)`);
}

/**
 * The TXT record value for `<selector>._domainkey.<domain>`: `k=rsa` with the base64 DER of the
 * SPKI (RFC 6376 §3.6.1), or `k=ed25519` with the raw 32-byte public key (RFC 8463 §4.2).
 */
export function dnsTxtValue(algorithm: DkimAlgorithm, publicKeyPem: string): string {
  const der = createPublicKey(publicKeyPem).export({ type: 'spki', format: 'der' });
  if (algorithm === 'ed25519-sha256') {
    // SPKI for Ed25519 is a fixed 12-byte prefix followed by the 32-byte key.
    return `v=DKIM1; k=ed25519; p=${der.subarray(der.length - 32).toString('base64')}`;
  }
  return `v=DKIM1; k=rsa; p=${der.toString('base64')}`;
}

export const dnsName = (selector: string, domain: string): string => `${selector}._domainkey.${domain}`;

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
