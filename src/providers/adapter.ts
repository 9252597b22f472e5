import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { Clock } from '../clock.js';
import type { ProviderAccount } from '../contract/providerAccount.js';

/**
 * The stored MIME of a hand-off: held (`mime`) when small (kept in the index, or a small spool
 * file read once at hand-off, for signing and sending), else the spool file `mimePath`,
 * streamed, or (PostgreSQL) `openMime`: a new stream of the database's pieces per call, so a
 * large body is never whole in memory.
 */
export type StoredMimeOfJob =
  | { mime: Buffer; mimePath?: undefined; openMime?: undefined }
  | { mime: null; mimePath: string; openMime?: undefined }
  | { mime: null; mimePath?: undefined; openMime: () => Readable };

/** A stream of the stored MIME, whichever way it is kept: read as it is consumed. */
export function openMimeOfJob(stored: StoredMimeOfJob): Readable {
  if (stored.mime) return Readable.from([stored.mime], { objectMode: false });
  return stored.openMime ? stored.openMime() : createReadStream(stored.mimePath);
}

/** One hand-off: the stored MIME (with headers to prepend) and its SMTP envelope. */
export type DeliveryJob = StoredMimeOfJob & {
  messageId: string;
  /** Header lines prepended at hand-off (DKIM-Signature, provider option headers), each ending CRLF. */
  prependHeaders: string;
  envelope: { from: string; to: string[] };
  providerOptions: Record<string, Record<string, string>> | null;
  /**
   * What JSON APIs need beyond the MIME: the recipients as the sender addressed them (To/Cc
   * headers; Bcc lives only here and in the envelope), and the tags, metadata and category
   * the message was sent with.
   */
  recipients: { to: string[]; cc: string[]; bcc: string[] };
  tags: string[];
  metadata: Record<string, string>;
  category: string | null;
};

/**
 * What an adapter reports. A `temporary` result may carry `retryAfterMs` (a 429 with reset
 * headers): the account is not tried again before then. `temporary` (connection errors, timeouts, 4xx, 429/5xx) and
 * `account` (bad credentials, suspended account, sender refused) move to the next candidate;
 * `permanent` ends the message (the content itself was refused). `sent` may carry recipients
 * the provider refused individually (they bounce; the others were accepted).
 */
export interface RecipientRefusal {
  email: string;
  reply: string;
}

/**
 * Recipient-level refusals ride along: `bounced` (5xx at RCPT: permanent for that address) and
 * `deferred` (4xx at RCPT: that address is tried again later, the others are done).
 */
export type SendResult =
  | { kind: 'sent'; providerMessageId: string | null; reply: string; bounced: RecipientRefusal[]; deferred: RecipientRefusal[] }
  | { kind: 'temporary'; reply: string; bounced?: RecipientRefusal[]; retryAfterMs?: number }
  | { kind: 'account'; reply: string }
  | { kind: 'permanent'; reply: string; bounced?: RecipientRefusal[] };

/** What every adapter is built with. */
export interface AdapterDeps {
  /** Request signatures and rate-limit resets read the time from it. */
  clock: Clock;
  /** How long one request to the provider (an API call, an SMTP step) may take. */
  timeoutMs: number;
}

export interface ProviderAdapter {
  send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult>;
  close(): Promise<void>;
}

/**
 * The stored MIME as a stream, `prefix` (hand-off headers) in front: held bytes go out as one
 * chunk, a large message is streamed from the spool.
 */
export function storedMimeStream(job: DeliveryJob, prefix = ''): Readable {
  if (job.mime) return Readable.from([prefix ? Buffer.concat([Buffer.from(prefix), job.mime]) : job.mime], { objectMode: false });
  if (!prefix) return openMimeOfJob(job);
  return Readable.from(
    (async function* () {
      yield Buffer.from(prefix);
      yield* openMimeOfJob(job);
    })(),
    { objectMode: false },
  );
}

/** The stored MIME as one buffer, `prefix` in front (for request bodies that carry it whole). */
export async function storedMimeBytes(job: DeliveryJob, prefix = ''): Promise<Buffer> {
  const mime = job.mime ? job.mime : job.openMime ? await buffer(job.openMime()) : await readFile(job.mimePath);
  return prefix ? Buffer.concat([Buffer.from(prefix), mime]) : mime;
}
