import { detailOrder } from '../contract/detailOrder.js';
import { asDetails, ContractError, type ErrorDetail } from '../contract/errors.js';
import type { Message } from '../contract/types.gen.js';
import { readControlHeaders } from '../mime/controlHeaders.js';
import { mailboxesOf, type ParsedMail } from '../mime/ingest.js';
import { BODY_MAX_LENGTH, checkMessageBody, MESSAGE_LIMITS } from './messageRules.js';
import { type MessageFacts, toOutgoingMessage } from './outgoingMessage.js';

const MAX_ATTACHMENTS = 20;

/** The size rules on attachments, with the HTTP codes (the parts are already decoded here). */
function attachmentDetails(sizes: number[]): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  if (sizes.length > MAX_ATTACHMENTS)
    details.push({ field: 'attachments', code: 'attachments:too_many' });
  sizes.forEach((size, i) => {
    if (size > MESSAGE_LIMITS.maxAttachmentBytes)
      details.push({ field: `attachments.${i}.content`, code: 'attachments:too_large' });
  });
  if (
    sizes.reduce((a, b) => a + b, 0) > MESSAGE_LIMITS.maxAttachmentsTotalBytes &&
    !details.some((d) => d.field === 'attachments')
  ) {
    details.push({ field: 'attachments', code: 'attachments:total_too_large' });
  }
  return details;
}

/**
 * The length rule on the text and html, with the HTTP codes. Over SMTP they are counted as they
 * stream by and never held, so the schema sees an empty stand-in and this judges the length.
 */
function bodyLengthDetails(mail: ParsedMail): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  if (mail.htmlLength !== undefined && mail.htmlLength > BODY_MAX_LENGTH.html)
    details.push({ field: 'html', code: 'html:too_long' });
  if (mail.textLength !== undefined && mail.textLength > BODY_MAX_LENGTH.text)
    details.push({ field: 'text', code: 'text:too_long' });
  return details;
}

export interface SmtpAcceptance {
  facts: MessageFacts;
  idempotencyKey: string | null;
}

/**
 * Judges a received message by the HTTP rules: its headers and control headers are mapped to
 * the Message fields they stand for and run through the same validator, so both doors refuse
 * the same things with the same codes. Recipients come from the envelope: those named in To
 * or Cc keep their header role, the rest are Bcc (delivered, never written into headers).
 */
export function judgeSmtpMessage(
  mail: ParsedMail,
  envelopeRecipients: string[],
  now: number,
): SmtpAcceptance {
  const control = readControlHeaders(mail.control, mail.unknownControl, mail.duplicateControl);
  const envelope = new Map(envelopeRecipients.map((r) => [r.toLowerCase(), r]));
  const inEnvelope = (list: { email: string; name?: string }[]) =>
    list.filter((a) => envelope.has(a.email.toLowerCase()));
  const to = inEnvelope(mailboxesOf(mail.to));
  const cc = inEnvelope(mailboxesOf(mail.cc));
  const named = new Set([...to, ...cc].map((a) => a.email.toLowerCase()));
  const bcc = [...envelope.entries()]
    .filter(([lower]) => !named.has(lower))
    .map(([, email]) => ({ email }));
  const from = mailboxesOf(mail.from);
  const replyTo = mailboxesOf(mail.replyTo);

  const body: Record<string, unknown> = {
    // More than one From address is not a single address: validated as the list it is.
    from: from.length === 1 ? from[0] : from.length === 0 ? undefined : from,
    // An SMTP message may name no visible recipient; its envelope recipients stand in for `to`.
    to: to.length > 0 ? to : bcc,
    subject: mail.subject,
    ...(cc.length ? { cc } : {}),
    ...(to.length > 0 && bcc.length ? { bcc } : {}),
    ...(replyTo.length ? { reply_to: replyTo } : {}),
    // Present or absent as in the message; their length is judged by bodyLengthDetails.
    ...(mail.textLength !== undefined ? { text: '' } : {}),
    ...(mail.htmlLength !== undefined ? { html: '' } : {}),
    ...control.body,
  };
  if (body.from === undefined) delete body.from;
  if (body.subject === undefined) delete body.subject;
  const check = checkMessageBody(body, now);
  const details = [
    ...(check.ok ? [] : check.details),
    ...bodyLengthDetails(mail),
    ...control.details,
    ...attachmentDetails(mail.attachmentSizes),
  ];
  if (details.length > 0) {
    const unique = new Map(details.map((d) => [d.field, d]));
    throw ContractError.validation(asDetails([...unique.values()].sort(detailOrder), details[0]));
  }
  const message = toOutgoingMessage(check.ok ? check.message : (body as unknown as Message));
  const facts: MessageFacts = {
    ...message,
    // Validation saw the envelope-only recipients as `to` when no header named anyone.
    to: to.length > 0 ? message.to : [],
    bcc: bcc.map((b) => ({ email: b.email })),
  };
  return { facts, idempotencyKey: control.idempotencyKey };
}
