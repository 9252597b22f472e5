/** provider-b-api: SendGrid v3 Mail Send; SendGrid builds its own MIME, so our DKIM signature does not survive. */
import type { ProviderAccount } from '../../contract/providerAccount.js';
import type { AdapterDeps, DeliveryJob, ProviderAdapter, SendResult } from '../adapter.js';
import { type ApiResponse, baseUrl, isResponse } from '../httpApi.js';
import {
  addressedRecipients,
  apiCredentials,
  base64Attachments,
  bearer,
  classifyJsonApiStatus,
  headerObject,
  missingApiKey,
  parseJsonObject,
  postJson,
} from '../jsonMapping.js';
import { type MessageParts, type NamedAddress, readMessageParts } from '../messageParts.js';

export const SENDGRID_API = 'https://api.sendgrid.com';
export const SENDGRID_API_EU = 'https://api.eu.sendgrid.com';

/** Its `headers` field refuses them. */
const RESERVED_HEADERS = new Set([
  'x-sg-id',
  'x-sg-eid',
  'received',
  'dkim-signature',
  'content-type',
  'content-transfer-encoding',
  'to',
  'from',
  'subject',
  'reply-to',
  'cc',
  'bcc',
]);
const MAX_CATEGORIES = 10;
export const MESSAGE_ID_ARG = 'postern_message_id';

type SgAddress = { email: string; name?: string };
const sgAddress = (a: NamedAddress): SgAddress =>
  a.name ? { email: a.email, name: a.name } : { email: a.email };

export function sendgridMailSend(parts: MessageParts, job: DeliveryJob): Record<string, unknown> {
  const { to, cc, bcc } = addressedRecipients(parts);
  // Every personalization needs a To: with only Bcc recipients owed, each gets its own.
  const personalizations =
    to.length > 0
      ? [
          {
            to: to.map(sgAddress),
            ...(cc.length ? { cc: cc.map(sgAddress) } : {}),
            ...(bcc.length ? { bcc: bcc.map(sgAddress) } : {}),
          },
        ]
      : bcc.map((a) => ({ to: [sgAddress(a)] }));

  const content: { type: string; value: string }[] = [];
  if (parts.text) content.push({ type: 'text/plain', value: parts.text });
  if (parts.html) content.push({ type: 'text/html', value: parts.html });
  // SendGrid refuses an empty body; a message with none gets the smallest text part there is.
  if (content.length === 0) content.push({ type: 'text/plain', value: ' ' });

  const headers = headerObject(parts, RESERVED_HEADERS);
  // Our Message-ID: replies thread to the id the client knows.
  if (parts.messageId) headers['Message-ID'] = `<${parts.messageId}>`;

  const categories = [
    ...new Set([...(parts.category ? [parts.category] : []), ...parts.tags]),
  ].slice(0, MAX_CATEGORIES);

  return {
    personalizations,
    from: sgAddress(parts.from),
    ...(parts.replyTo.length === 1 ? { reply_to: sgAddress(parts.replyTo[0]) } : {}),
    ...(parts.replyTo.length > 1 ? { reply_to_list: parts.replyTo.map(sgAddress) } : {}),
    subject: parts.subject,
    content,
    ...(parts.attachments.length
      ? {
          attachments: base64Attachments(parts).map((a) => ({
            content: a.base64,
            type: a.contentType,
            filename: a.filename,
            disposition: a.inlineContentId ? 'inline' : 'attachment',
            ...(a.inlineContentId ? { content_id: a.inlineContentId } : {}),
          })),
        }
      : {}),
    ...(categories.length ? { categories } : {}),
    custom_args: { ...parts.metadata, [MESSAGE_ID_ARG]: job.messageId },
    ...(Object.keys(headers).length ? { headers } : {}),
  };
}

function sendgridReply(res: ApiResponse): string {
  const errors = parseJsonObject(res.text)?.errors;
  if (!Array.isArray(errors) || errors.length === 0)
    return `${res.status} ${res.text.replace(/\s+/g, ' ').trim().slice(0, 300)}`.trim();
  const lines = errors.map(
    (e: { field?: unknown; message?: unknown }) =>
      `${typeof e.field === 'string' && e.field !== 'null' ? `${e.field}: ` : ''}${String(e.message ?? '')}`,
  );
  return `${res.status} ${lines.join('; ').slice(0, 500)}`;
}

/** SendGrid's statuses (docs/delivery.md#provider-b-api-sendgrid); 429 carries `X-RateLimit-Reset` (epoch seconds). */
export function classifySendgrid(res: ApiResponse, now: number): SendResult {
  if (res.status === 202) {
    const id = res.headers.get('x-message-id');
    return {
      kind: 'sent',
      providerMessageId: id,
      reply: `202 Accepted${id ? ` X-Message-Id: ${id}` : ''}`,
      bounced: [],
      deferred: [],
    };
  }
  const reply = sendgridReply(res);
  // 200 is sandbox mode: valid, but not queued for delivery. Not a send.
  if (res.status >= 200 && res.status < 300)
    return { kind: 'account', reply: `${reply} (not queued: sandbox mode?)` };
  return classifyJsonApiStatus(res, reply, now);
}

export class SendgridApiAdapter implements ProviderAdapter {
  constructor(private readonly deps: AdapterDeps) {}

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const creds = apiCredentials(account);
    if (!creds.apiKey) return missingApiKey(account.slug);
    const body = sendgridMailSend(await readMessageParts(job), job);
    const base = baseUrl(
      creds.endpoint,
      creds.region?.toLowerCase() === 'eu' ? SENDGRID_API_EU : SENDGRID_API,
    );
    const res = await postJson(
      `${base}/v3/mail/send`,
      bearer(creds.apiKey),
      body,
      this.deps.timeoutMs,
    );
    if (!isResponse(res)) return res;
    return classifySendgrid(res, this.deps.clock.now());
  }

  async close(): Promise<void> {}
}
