import { Readable } from 'node:stream';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type { Mailbox } from '../contract/address.js';
import { domainOf } from '../contract/address.js';
import { checkHeaderBlock, headerBlockLimit } from './structureLimits.js';

/** What a message's MIME is composed from (an HTTP send's validated body: accept/outgoingMessage.ts). */
export interface MessageContent {
  from: Mailbox;
  to: Mailbox[];
  cc: Mailbox[];
  replyTo: Mailbox[];
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  attachments: MimeAttachment[];
}

export interface MimeAttachment {
  filename: string;
  content: Buffer;
  contentType: string | null;
  contentId: string | null;
  disposition: 'attachment' | 'inline';
}

const toNodemailer = (m: Mailbox) =>
  m.name ? { name: m.name, address: m.email } : { name: '', address: m.email };

/** The Message-ID every door gives a message: its `m.` id at the sender's domain. */
export function messageIdHeader(id: string, fromEmail: string): string {
  return `<${id}@${domainOf(fromEmail)}>`;
}

/** Slices MailComposer base64-encodes one at a time (a multiple of 3 bytes: no carry between them). */
const CONTENT_SLICE_BYTES = 48 * 1024;

/** From this much content on, a message is composed as a stream (composeMimeStream). */
const STREAMED_CONTENT_BYTES = 256 * 1024;

/**
 * An attachment as MailComposer reads it: a big one as a stream of slices of the same memory, so
 * its base64 is made a slice at a time (given whole, a 10 MB attachment was encoded into a
 * 13 MB string, wrapped into another and copied into a buffer). The output is the same.
 */
function attachmentContent(content: Buffer): Buffer | Readable {
  if (content.length <= CONTENT_SLICE_BYTES) return content;
  return Readable.from(
    (function* slices() {
      for (let at = 0; at < content.length; at += CONTENT_SLICE_BYTES)
        yield content.subarray(at, at + CONTENT_SLICE_BYTES);
    })(),
    { objectMode: false },
  );
}

/** Bcc recipients stay in the index's envelope and never appear in the headers. */
function composer(
  id: string,
  message: MessageContent,
  date: Date,
  streamed: boolean,
): MailComposer {
  return new MailComposer({
    from: toNodemailer(message.from),
    to: message.to.map(toNodemailer),
    cc: message.cc.length ? message.cc.map(toNodemailer) : undefined,
    replyTo: message.replyTo.length ? message.replyTo.map(toNodemailer) : undefined,
    subject: message.subject,
    text: message.text ?? undefined,
    html: message.html ?? undefined,
    headers: message.headers,
    messageId: messageIdHeader(id, message.from.email),
    date,
    attachments: message.attachments.map((a) => ({
      filename: a.filename,
      content: streamed ? attachmentContent(a.content) : a.content,
      contentType: a.contentType ?? undefined,
      cid: a.contentId ?? undefined,
      contentDisposition: a.disposition,
    })),
    // The spool holds exactly what goes on the wire: CRLF line ends, even where the request's
    // text and html used bare LF (so DKIM signs the bytes the relay sends). A streamed message
    // gets them from nodemailer's line-end transform (bare LF → CRLF, as the regex below).
    newline: streamed ? 'windows' : undefined,
  });
}

/** True when a message is big enough to be composed as a stream rather than whole. */
export function composedAsStream(message: MessageContent): boolean {
  let bytes = (message.text?.length ?? 0) + (message.html?.length ?? 0);
  for (const a of message.attachments) bytes += a.content.length;
  return bytes >= STREAMED_CONTENT_BYTES;
}

/**
 * Canonical MIME for an HTTP send (nodemailer's MailComposer), whole: the cheapest for the
 * common small message (a stream cost the writer thread about 10 % more per message). Throws
 * MessageStructureRefused when the custom headers make a header block Postern would not take
 * (structureLimits.ts): a message its own parsers could not read again.
 */
export async function composeMime(
  id: string,
  message: MessageContent,
  date: Date,
): Promise<Buffer> {
  const built = await composer(id, message, date, false).compile().build();
  const mime = Buffer.from(built.toString('latin1').replace(/\r?\n/g, '\r\n'), 'latin1');
  checkHeaderBlock(mime);
  return mime;
}

/**
 * The same MIME as a stream of chunks, for a big message: a 25 MB attachment is base64-encoded
 * and written as it goes, never held whole a second time. Fails with MessageStructureRefused
 * as composeMime throws it, as soon as the header block has passed the limit.
 */
export function composeMimeStream(id: string, message: MessageContent, date: Date): Readable {
  const composed = composer(id, message, date, true).compile().createReadStream();
  const limited = headerBlockLimit();
  composed.on('error', (err) => limited.destroy(err));
  limited.on('close', () => composed.destroy());
  return composed.pipe(limited);
}
