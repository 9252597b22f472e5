import { type AddressObject, simpleParser } from 'mailparser';
import { type DeliveryJob, storedMimeStream } from './adapter.js';

export interface NamedAddress {
  email: string;
  name: string | null;
}

export interface MessageAttachment {
  filename: string;
  contentType: string;
  content: Buffer;
  contentId: string | null;
  inline: boolean;
}

/** For JSON APIs: the recipients this hand-off owes, so a retry after a partial hand-off never re-sends to one already served. */
export interface MessageParts {
  from: NamedAddress;
  replyTo: NamedAddress[];
  to: NamedAddress[];
  cc: NamedAddress[];
  bcc: NamedAddress[];
  subject: string;
  text: string | null;
  html: string | null;
  attachments: MessageAttachment[];
  /** Beyond the structural ones, as written. */
  headers: { name: string; value: string }[];
  messageId: string | null;
  tags: string[];
  metadata: Record<string, string>;
  category: string | null;
}

/** Every JSON API sets these from its own fields; never passed on as custom headers. */
const STRUCTURAL = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'reply-to',
  'sender',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-disposition',
  'content-id',
  'content-description',
  'return-path',
  'received',
  'dkim-signature',
  'x-mailer',
]);

function addresses(value: AddressObject | AddressObject[] | undefined): NamedAddress[] {
  if (!value) return [];
  const out: NamedAddress[] = [];
  for (const group of Array.isArray(value) ? value : [value]) {
    for (const a of group.value) {
      if (a.group)
        for (const m of a.group)
          if (m.address) out.push({ email: m.address, name: m.name || null });
      if (a.address) out.push({ email: a.address, name: a.name || null });
    }
  }
  return out;
}

/** The decoded message is held for one hand-off, which JSON APIs need anyway for their body. */
export async function readMessageParts(job: DeliveryJob): Promise<MessageParts> {
  const parsed = await simpleParser(job.mime ?? storedMimeStream(job), {
    skipHtmlToText: true,
    skipTextToHtml: true,
    skipTextLinks: true,
    skipImageLinks: true,
  });
  const owed = new Set(job.envelope.to.map((e) => e.toLowerCase()));
  const headerTo = addresses(parsed.to);
  const headerCc = addresses(parsed.cc);
  const named = new Map<string, NamedAddress>();
  for (const a of [...headerTo, ...headerCc]) named.set(a.email.toLowerCase(), a);
  const pick = (list: string[]) =>
    list
      .filter((e) => owed.has(e.toLowerCase()))
      .map((e) => named.get(e.toLowerCase()) ?? { email: e, name: null });
  const to = pick(job.recipients.to);
  const cc = pick(job.recipients.cc);
  const listed = new Set([...to, ...cc].map((a) => a.email.toLowerCase()));
  // Bcc, and any envelope recipient the header lists don't name (an SMTP-submitted message).
  const bcc = job.envelope.to
    .filter((e) => !listed.has(e.toLowerCase()))
    .map((e) => ({ email: e, name: null }));
  const from = addresses(parsed.from)[0] ?? { email: job.envelope.from, name: null };

  const headers: { name: string; value: string }[] = [];
  for (const line of parsed.headerLines) {
    if (STRUCTURAL.has(line.key)) continue;
    const colon = line.line.indexOf(':');
    headers.push({
      name: line.line.slice(0, colon).trim(),
      value: line.line
        .slice(colon + 1)
        .replace(/\r?\n[ \t]+/g, ' ')
        .trim(),
    });
  }
  const messageId = parsed.messageId ? parsed.messageId.replace(/^<|>$/g, '') : null;

  return {
    from,
    replyTo: addresses(parsed.replyTo),
    to,
    cc,
    bcc,
    subject: parsed.subject ?? '',
    text: parsed.text ?? null,
    html: typeof parsed.html === 'string' ? parsed.html : null,
    attachments: parsed.attachments.map((a) => ({
      filename: a.filename ?? (a.contentType.startsWith('image/') ? 'image' : 'attachment'),
      contentType: a.contentType,
      content: a.content,
      contentId: a.contentId ? a.contentId.replace(/^<|>$/g, '') : null,
      inline: a.contentDisposition === 'inline' || Boolean(a.related && a.contentId),
    })),
    headers,
    messageId,
    tags: job.tags,
    metadata: job.metadata,
    category: job.category,
  };
}

export function formatAddress(a: NamedAddress): string {
  if (!a.name) return a.email;
  return `"${a.name.replace(/["\\]/g, '\\$&')}" <${a.email}>`;
}
