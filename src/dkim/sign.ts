import type { Readable } from 'node:stream';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { sql, type Db } from '../store/db.js';
import { cachedPolicyRow } from '../store/policyCache.js';
import type { DkimKeyRow } from './keys.js';

/**
 * The header fields signed when present (relaxed/relaxed). Each present instance is signed;
 * headers added later by a relay (Received, Return-Path…) are not.
 */
export const SIGNED_HEADERS = [
  'From',
  'To',
  'Cc',
  'Subject',
  'Date',
  'Message-ID',
  'Reply-To',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
] as const;

export class DkimSignError extends Error {}

/** The from domain itself, then each parent down to two labels: a.b.example.com, b.example.com, example.com. */
export function signingDomainCandidates(fromDomain: string): string[] {
  const labels = fromDomain.trim().toLowerCase().replace(/\.$/, '').split('.');
  const out: string[] = [];
  for (let i = 0; i <= labels.length - 2; i++) out.push(labels.slice(i).join('.'));
  return out;
}

/** The project's active key for the from domain, else for its nearest parent that has one. */
export function dkimKeyFor(db: Db, projectId: string, fromDomain: string): DkimKeyRow | undefined {
  // null: no key applies, remembered too (most messages are not signed).
  const found = cachedPolicyRow(db, 'dkim', `${projectId}\u0000${fromDomain}`, () => {
    for (const domain of signingDomainCandidates(fromDomain)) {
      const row = sql(db, 'SELECT * FROM dkim_keys WHERE project_id = ? AND domain = ? AND removed_at IS NULL').get(projectId, domain) as DkimKeyRow | undefined;
      if (row) return row;
    }
    return null;
  });
  return found ?? undefined;
}

/**
 * The `DKIM-Signature:` header (ending with CRLF) to prepend to `message` at hand-off, or null
 * when no key of the project applies to the From domain. `message` must be the final bytes that
 * will be sent (all headers final); a stream is consumed. `d=` is the key's domain (the From
 * domain or a parent: relaxed DMARC alignment). Throws DkimSignError if signing fails (e.g. an
 * unusable stored key); the error never carries key material.
 */
export async function dkimSignatureFor(
  db: Db,
  projectId: string,
  fromDomain: string,
  message: Buffer | Readable,
  opts: { signTime?: Date | number } = {},
): Promise<string | null> {
  const key = dkimKeyFor(db, projectId, fromDomain);
  if (!key) return null;
  const result = await dkimSign(message, {
    canonicalization: 'relaxed/relaxed',
    // mailauth reads a colon-separated string here (an array would silently fall back to its defaults).
    headerList: SIGNED_HEADERS.join(':') as unknown as string[],
    signTime: opts.signTime,
    signatureData: [
      {
        signingDomain: key.domain,
        selector: key.selector,
        privateKey: key.private_key,
        algorithm: key.algorithm,
        canonicalization: 'relaxed/relaxed',
      },
    ],
  } as Parameters<typeof dkimSign>[1]);
  if (result.errors?.length) {
    const first = result.errors[0] as unknown as { err?: Error };
    throw new DkimSignError(`DKIM signing with key ${key.id} (${key.selector}._domainkey.${key.domain}) failed: ${first.err?.message ?? 'unknown error'}`);
  }
  const signatures = result.signatures;
  if (!/^DKIM-Signature:/i.test(signatures) || !signatures.endsWith('\r\n')) {
    throw new DkimSignError(`DKIM signing with key ${key.id} produced no signature (is the message empty?)`);
  }
  return signatures;
}
