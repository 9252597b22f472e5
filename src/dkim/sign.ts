import { Readable } from 'node:stream';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { headerBlockEnd } from '../mime/headerBlock.js';
import { cachedDkimKey, type DkimKeyRow } from '../store/dkimKeys.js';
import type { Queries } from '../store/queries.js';

/**
 * The header fields signed when present. Each present instance is signed;
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
export function dkimKeyFor(q: Queries, projectId: string, fromDomain: string): Promise<DkimKeyRow | undefined> {
  return cachedDkimKey(q, projectId, fromDomain, signingDomainCandidates(fromDomain));
}

/**
 * The header canonicalisation to sign with: relaxed, unless the header block holds a byte that
 * mailauth's relaxed canonicalisation (a JavaScript `\s` over the latin1 bytes) folds but RFC
 * 6376 §3.4.2 does not (VT, FF, 0xA0, which is in UTF-8 such as "à" = C3 A0). Its signature
 * then fails at every verifier that follows the RFC, so such a message is signed `simple`
 * (its header bytes as they are), which both agree on.
 */
export function headerCanonicalization(headerBlock: Buffer): 'relaxed' | 'simple' {
  for (const byte of headerBlock) if (byte === 0x0b || byte === 0x0c || byte === 0xa0) return 'simple';
  return 'relaxed';
}

/** A header block longer than this is not looked for (and signed `simple`, safe whatever it holds). */
const HEADER_SCAN_BYTES = 1024 * 1024;

/** The header block of `bytes`, or null if it does not end within HEADER_SCAN_BYTES. */
function headerBlockOf(bytes: Buffer): Buffer | null {
  const end = headerBlockEnd(bytes.subarray(0, HEADER_SCAN_BYTES));
  return end < 0 ? null : bytes.subarray(0, end);
}

/**
 * Reads a stream up to the end of its header block; gives back that block (null past
 * HEADER_SCAN_BYTES) and a stream of the whole message (the bytes already read, then the rest).
 */
async function splitHeaders(stream: Readable): Promise<{ headerBlock: Buffer | null; whole: Readable }> {
  const source = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let seen = Buffer.alloc(0);
  let done = false;
  while (!done && seen.length < HEADER_SCAN_BYTES && headerBlockEnd(seen) < 0) {
    const next = await source.next();
    if (next.done) done = true;
    else seen = Buffer.concat([seen, next.value]);
  }
  const head = seen;
  async function* replay(): AsyncGenerator<Buffer> {
    yield head;
    if (done) return;
    for (let next = await source.next(); !next.done; next = await source.next()) yield next.value;
  }
  return { headerBlock: headerBlockOf(head), whole: Readable.from(replay()) };
}

/**
 * The `DKIM-Signature:` header (ending with CRLF) to prepend to `message` at hand-off, or null
 * when no key of the project applies to the From domain. `message` must be the final bytes that
 * will be sent (all headers final); a stream is consumed. `d=` is the key's domain (the From
 * domain or a parent: relaxed DMARC alignment). `signTime` is `t=`: given, because mailauth
 * otherwise reads the clock twice (for the signed header and for the emitted one) and a
 * signature straddling a second boundary carried a `t=` it had not signed. Throws
 * DkimSignError if signing fails (e.g. an unusable stored key); the error never carries key
 * material.
 */
export async function dkimSignatureFor(q: Queries, projectId: string, fromDomain: string, message: Buffer | Readable, signTime: Date): Promise<string | null> {
  const key = await dkimKeyFor(q, projectId, fromDomain);
  if (!key) return null;
  let input = message;
  let headerBlock: Buffer | null;
  if (Buffer.isBuffer(message)) headerBlock = headerBlockOf(message);
  else ({ headerBlock, whole: input } = await splitHeaders(message));
  const canonicalization = `${headerBlock ? headerCanonicalization(headerBlock) : 'simple'}/relaxed`;
  const result = await dkimSign(input, {
    canonicalization,
    // mailauth reads a colon-separated string here (an array would silently fall back to its defaults).
    headerList: SIGNED_HEADERS.join(':') as unknown as string[],
    signTime,
    signatureData: [
      {
        signingDomain: key.domain,
        selector: key.selector,
        privateKey: key.private_key,
        algorithm: key.algorithm,
        canonicalization,
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
