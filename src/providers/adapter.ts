import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { Clock } from '../clock.js';
import type { ProviderAccount } from '../contract/providerAccount.js';

/** Held when small, else the spool file or (PostgreSQL) a new stream of the database's pieces per call. */
export type StoredMimeOfJob =
  | { mime: Buffer; mimePath?: undefined; openMime?: undefined }
  | { mime: null; mimePath: string; openMime?: undefined }
  | { mime: null; mimePath?: undefined; openMime: () => Readable };

export function openMimeOfJob(stored: StoredMimeOfJob): Readable {
  if (stored.mime) return Readable.from([stored.mime], { objectMode: false });
  return stored.openMime ? stored.openMime() : createReadStream(stored.mimePath);
}

export type DeliveryJob = StoredMimeOfJob & {
  messageId: string;
  /** Header lines prepended at hand-off (DKIM-Signature, provider option headers), each ending CRLF. */
  prependHeaders: string;
  envelope: { from: string; to: string[] };
  providerOptions: Record<string, Record<string, string>> | null;
  /** For JSON APIs: the recipients as addressed (Bcc lives only here and in the envelope), tags, metadata, category. */
  recipients: { to: string[]; cc: string[]; bcc: string[] };
  tags: string[];
  metadata: Record<string, string>;
  category: string | null;
};

export interface RecipientRefusal {
  email: string;
  reply: string;
}

/**
 * `temporary` (may carry `retryAfterMs`) and `account` move to the next candidate; `permanent` ends the message.
 * At RCPT, `bounced` (5xx) addresses bounce and `deferred` (4xx) ones are tried again later.
 */
export type SendResult =
  | {
      kind: 'sent';
      providerMessageId: string | null;
      reply: string;
      bounced: RecipientRefusal[];
      deferred: RecipientRefusal[];
    }
  | { kind: 'temporary'; reply: string; bounced?: RecipientRefusal[]; retryAfterMs?: number }
  | { kind: 'account'; reply: string }
  | { kind: 'permanent'; reply: string; bounced?: RecipientRefusal[] };

export interface AdapterDeps {
  clock: Clock;
  timeoutMs: number;
}

export interface ProviderAdapter {
  send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult>;
  close(): Promise<void>;
}

export function storedMimeStream(job: DeliveryJob, prefix = ''): Readable {
  if (job.mime)
    return Readable.from([prefix ? Buffer.concat([Buffer.from(prefix), job.mime]) : job.mime], {
      objectMode: false,
    });
  if (!prefix) return openMimeOfJob(job);
  return Readable.from(
    (async function* () {
      yield Buffer.from(prefix);
      yield* openMimeOfJob(job);
    })(),
    { objectMode: false },
  );
}

export async function storedMimeBytes(job: DeliveryJob, prefix = ''): Promise<Buffer> {
  const mime = job.mime
    ? job.mime
    : job.openMime
      ? await buffer(job.openMime())
      : await readFile(job.mimePath);
  return prefix ? Buffer.concat([Buffer.from(prefix), mime]) : mime;
}
