import { type Mailbox, toMailbox } from '../contract/address.js';
import type { Address, Message, Recipients } from '../contract/types.gen.js';
import type { MessageContent } from '../mime/composeMime.js';

/** What policy and the index need of a validated message, whichever door it came through. */
export interface MessageFacts {
  from: Mailbox;
  to: Mailbox[];
  cc: Mailbox[];
  /** Envelope-only recipients: delivered to, never written into headers. */
  bcc: Mailbox[];
  replyTo: Mailbox[];
  subject: string;
  tags: string[];
  metadata: Record<string, string>;
  category: string | null;
  /** The request's instant, echoed verbatim, and its time in ms. */
  scheduledAt: { raw: string; at: number } | null;
  paused: boolean;
  routing: { provider: string | string[] | null; strategy: string | null };
  providerOptions: Record<string, Record<string, string>> | null;
}

/** An HTTP send: the facts plus the content MailComposer turns into MIME (src/mime/composeMime.ts). */
export interface OutgoingMessage extends MessageFacts, MessageContent {}

function list(value: Recipients | undefined): Mailbox[] {
  if (value === undefined) return [];
  return (Array.isArray(value) ? (value as Address[]) : [value]).map(toMailbox);
}

/**
 * A string map without its undefined entries. Built with Object.fromEntries, which defines each
 * key: assigning `map["__proto__"] = v` would set the prototype instead and drop the entry.
 */
function definedEntries(
  map: Record<string, string | undefined> | null | undefined,
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(map ?? {}).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}

/** Normalises a body that has passed every validation rule. */
export function toOutgoingMessage(body: Message): OutgoingMessage {
  const headers = definedEntries(body.headers);
  const metadata = definedEntries(body.metadata);
  return {
    from: toMailbox(body.from),
    to: list(body.to),
    cc: list(body.cc),
    bcc: list(body.bcc),
    replyTo: list(body.reply_to),
    subject: body.subject,
    html: body.html ?? null,
    text: body.text ?? null,
    headers,
    attachments: (body.attachments ?? []).map((a) => ({
      filename: a.filename,
      content: Buffer.from(a.content, 'base64'),
      contentType: a.content_type ?? null,
      contentId: a.content_id ?? null,
      disposition: a.disposition ?? (a.content_id ? 'inline' : 'attachment'),
    })),
    tags: body.tags ?? [],
    metadata,
    category: body.category ?? null,
    scheduledAt: body.scheduled_at
      ? { raw: body.scheduled_at, at: Date.parse(body.scheduled_at) }
      : null,
    paused: body.paused === true,
    routing: { provider: body.routing?.provider ?? null, strategy: body.routing?.strategy ?? null },
    providerOptions:
      (body.provider_options as Record<string, Record<string, string>> | null | undefined) ?? null,
  };
}
