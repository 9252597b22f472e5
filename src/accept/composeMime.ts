import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type { Mailbox } from '../contract/address.js';
import { domainOf } from '../contract/address.js';
import type { OutgoingMessage } from './outgoingMessage.js';

const toNodemailer = (m: Mailbox) => (m.name ? { name: m.name, address: m.email } : { name: '', address: m.email });

/** The Message-ID every door gives a message: its `m.` id at the sender's domain. */
export function messageIdHeader(id: string, fromEmail: string): string {
  return `<${id}@${domainOf(fromEmail)}>`;
}

/**
 * Canonical MIME for an HTTP send (nodemailer's MailComposer). Bcc recipients stay in the
 * index's envelope and never appear in the headers.
 */
export async function composeMime(id: string, message: OutgoingMessage, date: Date): Promise<Buffer> {
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
      content: a.content,
      contentType: a.contentType ?? undefined,
      cid: a.contentId ?? undefined,
      contentDisposition: a.disposition,
    })),
  });
  // The spool holds exactly what goes on the wire: CRLF line ends, even where the request's
  // text and html used bare LF (so DKIM signs the bytes the relay sends).
  const built = await composer.compile().build();
  return Buffer.from(built.toString('latin1').replace(/\r?\n/g, '\r\n'), 'latin1');
}
