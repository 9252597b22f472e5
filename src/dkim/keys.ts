import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import type { DkimKeyRow } from '../store/dkimKeys.js';

/**
 * DKIM keys: generation, import and the DNS TXT record (their rows: store/dkimKeys.ts).
 * Private keys are never logged or printed.
 */

export type DkimAlgorithm = DkimKeyRow['algorithm'];

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
    if (bits < MIN_RSA_BITS)
      throw new DkimKeyError(`RSA key of ${bits} bits is too short (at least ${MIN_RSA_BITS})`);
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

export const dnsName = (selector: string, domain: string): string =>
  `${selector}._domainkey.${domain}`;
