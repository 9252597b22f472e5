/** provider-d-api: Resend builds its own MIME; an `Idempotency-Key` makes a hand-off repeated after a crash send once. */
import { createHash } from 'node:crypto';
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
  nameAddr,
  parseJsonObject,
  postJson,
} from '../jsonMapping.js';
import { type MessageParts, type NamedAddress, readMessageParts } from '../messageParts.js';

export const RESEND_API = 'https://api.resend.com';

const RESERVED_HEADERS = new Set(['message-id']);
const TAG_MAX = 256;

/** Its `.` is not allowed in a tag: `m.01…` → `m_01…`. */
export const MESSAGE_ID_TAG = 'postern_message_id';
export const encodeMessageIdTag = (id: string) => id.replace('.', '_');
export function decodeMessageIdTag(value: unknown): string | null {
  return typeof value === 'string' && /^m_[0-9a-z]{26}$/.test(value) ? `m.${value.slice(2)}` : null;
}

const tagText = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, TAG_MAX);

/** Other characters become `_`; a name already taken (or an empty value) is left out. */
export function resendTags(
  parts: MessageParts,
  messageId: string,
): { name: string; value: string }[] {
  const tags = new Map<string, string>();
  const add = (name: string, value: string) => {
    const n = tagText(name);
    const v = tagText(value);
    if (n && v && !tags.has(n)) tags.set(n, v);
  };
  add(MESSAGE_ID_TAG, encodeMessageIdTag(messageId));
  if (parts.category) add('category', parts.category);
  for (const t of parts.tags) add(`tag_${t}`, 'true');
  for (const [k, v] of Object.entries(parts.metadata)) add(k, v);
  return [...tags].map(([name, value]) => ({ name, value }));
}

export function resendEmail(
  parts: MessageParts,
  messageId: string,
  rcpt: { to: NamedAddress[]; cc: NamedAddress[]; bcc: NamedAddress[] },
): Record<string, unknown> {
  const headers = headerObject(parts, RESERVED_HEADERS);
  return {
    from: nameAddr(parts.from),
    to: rcpt.to.map(nameAddr),
    ...(rcpt.cc.length ? { cc: rcpt.cc.map(nameAddr) } : {}),
    ...(rcpt.bcc.length ? { bcc: rcpt.bcc.map(nameAddr) } : {}),
    ...(parts.replyTo.length ? { reply_to: parts.replyTo.map(nameAddr) } : {}),
    subject: parts.subject,
    ...(parts.html ? { html: parts.html } : {}),
    // Without `text` Resend derives one from the html; an empty string keeps the message as sent.
    text: parts.html ? (parts.text ?? '') : parts.text || ' ',
    ...(Object.keys(headers).length ? { headers } : {}),
    ...(parts.attachments.length
      ? {
          attachments: base64Attachments(parts).map((a) => ({
            content: a.base64,
            filename: a.filename,
            content_type: a.contentType,
            ...(a.inlineContentId ? { content_id: a.inlineContentId } : {}),
          })),
        }
      : {}),
    tags: resendTags(parts, messageId),
  };
}

/** The same hand-off repeated is the same request. */
export function idempotencyKey(
  messageId: string,
  rcpt: { to: NamedAddress[]; cc: NamedAddress[]; bcc: NamedAddress[] },
): string {
  const who = [...rcpt.to, ...rcpt.cc, ...rcpt.bcc]
    .map((a) => a.email.toLowerCase())
    .sort()
    .join(',');
  return `postern/${messageId}/${createHash('sha256').update(who).digest('hex').slice(0, 16)}`;
}

const ACCOUNT_ERRORS = new Set([
  'missing_api_key',
  'invalid_api_key',
  'restricted_api_key',
  'suspended_api_key',
  'invalid_permission',
  'invalid_access',
  'invalid_region',
  'invalid_from_address',
  'invalid_to_address',
  'daily_quota_exceeded',
  'monthly_quota_exceeded',
]);

/** Resend's answers by what they mean for the hand-off (docs/delivery.md#provider-d-api-resend); 409 is the same key in progress. */
export function classifyResend(res: ApiResponse, now: number): SendResult {
  const body = parseJsonObject(res.text);
  if (res.status >= 200 && res.status < 300) {
    const id = typeof body?.id === 'string' ? body.id : null;
    return {
      kind: 'sent',
      providerMessageId: id,
      reply: `${res.status} id ${id ?? '(none)'}`,
      bounced: [],
      deferred: [],
    };
  }
  const name = typeof body?.name === 'string' ? body.name : null;
  const reply = name
    ? `${res.status} ${name}: ${String(body?.message ?? '')
        .replace(/\s+/g, ' ')
        .slice(0, 400)}`
    : `${res.status} ${res.text.replace(/\s+/g, ' ').trim().slice(0, 300)}`.trim();
  if ((name && ACCOUNT_ERRORS.has(name)) || res.status === 401 || res.status === 403)
    return { kind: 'account', reply };
  if (res.status === 409) return { kind: 'temporary', reply };
  return classifyJsonApiStatus(res, reply, now);
}

export class ResendApiAdapter implements ProviderAdapter {
  constructor(private readonly deps: AdapterDeps) {}

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const creds = apiCredentials(account);
    if (!creds.apiKey) return missingApiKey(account.slug);
    const parts = await readMessageParts(job);
    const url = `${baseUrl(creds.endpoint, RESEND_API)}/emails`;
    const { to, cc, bcc } = addressedRecipients(parts);
    if (to.length > 0) return this.post(url, creds.apiKey, parts, job.messageId, { to, cc, bcc });

    // Only Bcc owed: one copy each, addressed to themselves alone; a failure part-way leaves the rest deferred.
    let first: Extract<SendResult, { kind: 'sent' }> | null = null;
    for (const [i, r] of bcc.entries()) {
      const result = await this.post(url, creds.apiKey, parts, job.messageId, {
        to: [r],
        cc: [],
        bcc: [],
      });
      if (result.kind === 'sent') {
        first ??= result;
        continue;
      }
      if (!first) return result;
      return {
        ...first,
        deferred: bcc.slice(i).map((a) => ({ email: a.email, reply: result.reply })),
      };
    }
    return first ?? { kind: 'permanent', reply: 'no recipient left to send to' };
  }

  private async post(
    url: string,
    apiKey: string,
    parts: MessageParts,
    messageId: string,
    rcpt: { to: NamedAddress[]; cc: NamedAddress[]; bcc: NamedAddress[] },
  ): Promise<SendResult> {
    const auth = { ...bearer(apiKey), 'idempotency-key': idempotencyKey(messageId, rcpt) };
    const res = await postJson(url, auth, resendEmail(parts, messageId, rcpt), this.deps.timeoutMs);
    if (!isResponse(res)) return res;
    return classifyResend(res, this.deps.clock.now());
  }

  async close(): Promise<void> {}
}
