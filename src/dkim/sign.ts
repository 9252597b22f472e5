import { Readable } from 'node:stream';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { headerBlockEnd } from '../mime/headerBlock.js';
import { cachedDkimKey, type DkimKeyRow } from '../store/dkimKeys.js';
import type { Queries } from '../store/queries.js';

/** Signed when present, each instance; headers a relay adds later (Received, Return-Path…) are not. */
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

/** a.b.example.com, b.example.com, example.com. */
export function signingDomainCandidates(fromDomain: string): string[] {
  const labels = fromDomain.trim().toLowerCase().replace(/\.$/, '').split('.');
  const out: string[] = [];
  for (let i = 0; i <= labels.length - 2; i++) out.push(labels.slice(i).join('.'));
  return out;
}

export function dkimKeyFor(
  q: Queries,
  projectId: string,
  fromDomain: string,
): Promise<DkimKeyRow | undefined> {
  return cachedDkimKey(q, projectId, fromDomain, signingDomainCandidates(fromDomain));
}

/**
 * Relaxed, unless the block holds a byte mailauth's relaxed rule folds but RFC 6376 §3.4.2 does not (VT, FF, 0xA0):
 * its signature would fail at RFC verifiers, so such a message is signed `simple`.
 */
export function headerCanonicalization(headerBlock: Buffer): 'relaxed' | 'simple' {
  for (const byte of headerBlock)
    if (byte === 0x0b || byte === 0x0c || byte === 0xa0) return 'simple';
  return 'relaxed';
}

/** A longer header block is not looked for (and signed `simple`, safe whatever it holds). */
const HEADER_SCAN_BYTES = 1024 * 1024;

function headerBlockOf(bytes: Buffer): Buffer | null {
  const end = headerBlockEnd(bytes.subarray(0, HEADER_SCAN_BYTES));
  return end < 0 ? null : bytes.subarray(0, end);
}

/** The header block (null past HEADER_SCAN_BYTES) and a stream of the whole message. */
async function splitHeaders(
  stream: Readable,
): Promise<{ headerBlock: Buffer | null; whole: Readable }> {
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
 * The `DKIM-Signature:` line for the final bytes of `message`, or null when no key applies. `signTime` is `t=`:
 * mailauth otherwise reads the clock twice and a signature straddling a second carried a `t=` it had not signed.
 */
export async function dkimSignatureFor(
  q: Queries,
  projectId: string,
  fromDomain: string,
  message: Buffer | Readable,
  signTime: Date,
): Promise<string | null> {
  const key = await dkimKeyFor(q, projectId, fromDomain);
  if (!key) return null;
  let input = message;
  let headerBlock: Buffer | null;
  if (Buffer.isBuffer(message)) headerBlock = headerBlockOf(message);
  else ({ headerBlock, whole: input } = await splitHeaders(message));
  const canonicalization = `${headerBlock ? headerCanonicalization(headerBlock) : 'simple'}/relaxed`;
  const result = await dkimSign(input, {
    canonicalization,
    // mailauth reads a colon-separated string here (an array silently falls back to its defaults).
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
    throw new DkimSignError(
      `DKIM signing with key ${key.id} (${key.selector}._domainkey.${key.domain}) failed: ${first.err?.message ?? 'unknown error'}`,
    );
  }
  const signatures = result.signatures;
  if (!/^DKIM-Signature:/i.test(signatures) || !signatures.endsWith('\r\n')) {
    throw new DkimSignError(
      `DKIM signing with key ${key.id} produced no signature (is the message empty?)`,
    );
  }
  return signatures;
}
