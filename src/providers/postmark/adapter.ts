import type { ProviderAccount } from '../../contract/providerAccount.js';
import type {
  AdapterDeps,
  DeliveryJob,
  ProviderAdapter,
  RecipientRefusal,
  SendResult,
} from '../adapter.js';
import { type ApiResponse, baseUrl, classifyStatus, isResponse, replyText } from '../httpApi.js';
import {
  addressedRecipients,
  apiCredentials,
  base64Attachments,
  classifyJsonApiStatus,
  missingApiKey,
  nameAddr,
  parseJsonObject,
  postJson,
} from '../jsonMapping.js';
import { type MessageParts, type NamedAddress, readMessageParts } from '../messageParts.js';

export const POSTMARK_API = 'https://api.postmarkapp.com';
export const DEFAULT_MESSAGE_STREAM = 'outbound';
export const POSTMARK_METADATA = { fields: 10, name: 20, value: 80 };
export const POSTERN_ID_METADATA = 'postern_message_id';

/** Postmark's 422 ErrorCodes by what they mean for the hand-off (docs/delivery.md#provider-e-api-postmark); others are permanent. */
const ACCOUNT_CODES = new Set([10, 400, 401, 405, 412, 413, 1235, 1236]);
const TEMPORARY_CODES = new Set([100, 429]);
export const INACTIVE_RECIPIENT = 406;

/** The addresses a 406 names ("… Found inactive addresses: a@x, b@y. …"). */
export function inactiveRecipients(message: string): string[] {
  const m = /inactive addresses:\s*(.+?)\.(?:\s+Inactive|\s*$)/i.exec(message);
  if (!m) return [];
  return m[1].split(/[,;\s]+/).filter((a) => a.includes('@'));
}

export function classifyPostmark(
  res: ApiResponse,
  reply: string,
  now: number,
  owed: string[],
): Exclude<SendResult, { kind: 'sent' }> {
  const answer = parseJsonObject(res.text);
  const code = typeof answer?.ErrorCode === 'number' ? answer.ErrorCode : null;
  const message = typeof answer?.Message === 'string' ? answer.Message : '';
  if (res.status === 429 || res.status >= 500 || (code !== null && TEMPORARY_CODES.has(code))) {
    return classifyStatus({ ...res, status: res.status >= 500 ? res.status : 429 }, reply, now);
  }
  if (res.status === 401 || (code !== null && ACCOUNT_CODES.has(code)))
    return { kind: 'account', reply };
  if (code === INACTIVE_RECIPIENT) {
    // Postmark sends nothing and names the suppressed addresses: they bounce; the others are still owed the message.
    const owedByLower = new Map(owed.map((e) => [e.toLowerCase(), e]));
    const bounced: RecipientRefusal[] = [];
    for (const a of inactiveRecipients(message)) {
      const email = owedByLower.get(a.toLowerCase());
      if (email && !bounced.some((b) => b.email === email)) bounced.push({ email, reply });
    }
    if (bounced.length > 0 && bounced.length < owed.length)
      return { kind: 'temporary', reply, bounced };
    return { kind: 'permanent', reply, bounced };
  }
  if (code !== null) return { kind: 'permanent', reply };
  return classifyJsonApiStatus(res, reply, now);
}

export function postmarkMetadata(
  messageId: string,
  metadata: Record<string, string>,
): Record<string, string> {
  const out: [string, string][] = [[POSTERN_ID_METADATA, messageId]];
  const taken = new Set([POSTERN_ID_METADATA]);
  for (const [key, value] of Object.entries(metadata)) {
    if (out.length >= POSTMARK_METADATA.fields) break;
    // Postmark refuses names differing only in case.
    if (
      taken.has(key.toLowerCase()) ||
      key.length > POSTMARK_METADATA.name ||
      value.length > POSTMARK_METADATA.value
    )
      continue;
    taken.add(key.toLowerCase());
    out.push([key, value]);
  }
  // Defined, not assigned: a field named "__proto__" stays a field.
  return Object.fromEntries(out);
}

export function postmarkBody(parts: MessageParts, job: DeliveryJob): Record<string, unknown> {
  const list = (addresses: NamedAddress[]) => addresses.map(nameAddr).join(', ');
  // Postmark takes a message addressed only by Cc or Bcc (no To) as it is.
  const { to, cc, bcc } = addressedRecipients(parts);
  const body: Record<string, unknown> = { From: nameAddr(parts.from) };
  if (to.length > 0) body.To = list(to);
  if (cc.length > 0) body.Cc = list(cc);
  if (bcc.length > 0) body.Bcc = list(bcc);
  if (parts.replyTo.length > 0) body.ReplyTo = list(parts.replyTo);
  body.Subject = parts.subject;
  if (parts.text !== null) body.TextBody = parts.text;
  if (parts.html !== null) body.HtmlBody = parts.html;
  if (parts.headers.length > 0)
    body.Headers = parts.headers.map((h) => ({ Name: h.name, Value: h.value }));
  if (parts.attachments.length > 0) {
    body.Attachments = base64Attachments(parts).map((a) => ({
      Name: a.filename,
      Content: a.base64,
      ContentType: a.contentType,
      ...(a.inlineContentId ? { ContentID: `cid:${a.inlineContentId}` } : {}),
    }));
  }
  const tag = parts.category ?? parts.tags[0];
  if (tag) body.Tag = tag;
  body.Metadata = postmarkMetadata(job.messageId, parts.metadata);
  body.MessageStream =
    job.providerOptions?.['provider-e-api']?.message_stream ?? DEFAULT_MESSAGE_STREAM;
  return body;
}

/** provider-e-api: Postmark rebuilds the MIME from JSON fields, so our DKIM signature does not survive; it signs itself. */
export class PostmarkApiAdapter implements ProviderAdapter {
  constructor(private readonly deps: AdapterDeps) {}

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const { apiKey, endpoint } = apiCredentials(account);
    if (!apiKey) return missingApiKey(account.slug);
    const parts = await readMessageParts(job);
    const res = await postJson(
      `${baseUrl(endpoint, POSTMARK_API)}/email`,
      { 'x-postmark-server-token': apiKey },
      postmarkBody(parts, job),
      this.deps.timeoutMs,
    );
    if (!isResponse(res)) return res;
    const reply = replyText(res);
    const answer = res.status === 200 ? parseJsonObject(res.text) : null;
    // A 200 carries ErrorCode 0; anything else in it is an error like a 422's.
    if (res.status !== 200 || (typeof answer?.ErrorCode === 'number' && answer.ErrorCode !== 0)) {
      return classifyPostmark(
        res.status === 200 ? { ...res, status: 422 } : res,
        reply,
        this.deps.clock.now(),
        job.envelope.to,
      );
    }
    const id = typeof answer?.MessageID === 'string' ? answer.MessageID : null;
    return { kind: 'sent', providerMessageId: id, reply, bounced: [], deferred: [] };
  }

  async close(): Promise<void> {}
}
