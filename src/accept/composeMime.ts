import { Readable } from 'node:stream';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type { Mailbox } from '../contract/address.js';
import { domainOf } from '../contract/address.js';
import type { OutgoingMessage } from './outgoingMessage.js';

const toNodemailer = (m: Mailbox) => (m.name ? { name: m.name, address: m.email } : { name: '', address: m.email });

/** The Message-ID every door gives a message: its `m.` id at the sender's domain. */
export function messageIdHeader(id: string, fromEmail: string): string {
  return `<${id}@${domainOf(fromEmail)}>`;
}

/** Slices MailComposer base64-encodes one at a time (a multiple of 3 bytes: no carry between them). */
const CONTENT_SLICE_BYTES = 48 * 1024;

/**
 * An attachment as MailComposer reads it: a big one as a stream of slices of the same memory, so
 * its base64 is made a slice at a time (given whole, a 10 MB attachment was encoded into a
 * 13 MB string, wrapped into another and copied into a buffer). The output is the same.
 */
function attachmentContent(content: Buffer): Buffer | Readable {
  if (content.length <= CONTENT_SLICE_BYTES) return content;
  return Readable.from(
    (function* slices() {
      for (let at = 0; at < content.length; at += CONTENT_SLICE_BYTES) yield content.subarray(at, at + CONTENT_SLICE_BYTES);
    })(),
    { objectMode: false },
  );
}

/**
 * Canonical MIME for an HTTP send (nodemailer's MailComposer), as a stream of chunks: a 25 MB
 * attachment is base64-encoded and written as it goes, never held whole a second time. Bcc
 * recipients stay in the index's envelope and never appear in the headers.
 */
export function composeMime(id: string, message: OutgoingMessage, date: Date): Readable {
  const composer = new MailComposer({
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
      content: attachmentContent(a.content),
      contentType: a.contentType ?? undefined,
      cid: a.contentId ?? undefined,
      contentDisposition: a.disposition,
    })),
    // The spool holds exactly what goes on the wire: CRLF line ends, even where the request's
    // text and html used bare LF (so DKIM signs the bytes the relay sends).
    newline: 'windows',
  });
  return composer.compile().createReadStream();
}
