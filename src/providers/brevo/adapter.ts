import type { ProviderAccount } from '../../contract/providerAccount.js';
import type { AdapterDeps, DeliveryJob, ProviderAdapter, SendResult } from '../adapter.js';
import { type ApiResponse, baseUrl, classifyStatus, isResponse, replyText } from '../httpApi.js';
import {
  addressedRecipients,
  apiCredentials,
  base64Attachments,
  classifyJsonApiStatus,
  headerObject,
  missingApiKey,
  parseJsonObject,
  postJson,
} from '../jsonMapping.js';
import { type MessageParts, type NamedAddress, readMessageParts } from '../messageParts.js';

export const BREVO_API = 'https://api.brevo.com';
/** Echoed in every webhook: carries our message id back, unless the sender set the header itself. */
export const BREVO_CUSTOM_HEADER = 'X-Mailin-custom';
export const POSTERN_ID_FIELD = 'postern_message_id';

/** Brevo's error codes by what they mean for the hand-off (docs/delivery.md#provider-f-api-brevo). */
const ACCOUNT_ERROR_CODES = new Set([
  'unauthorized',
  'not_enough_credits',
  'permission_denied',
  'account_under_validation',
  'reseller_permission_denied',
]);
const SENDER_REFUSED =
  /sender .*(not valid|invalid|not verified|not allowed|not authori[sz]ed|blocked)|validate your sender|authenticate your domain/i;

export function classifyBrevo(
  res: ApiResponse,
  reply: string,
  now: number,
): Exclude<SendResult, { kind: 'sent' }> {
  const body = parseJsonObject(res.text);
  const code = typeof body?.code === 'string' ? body.code : '';
  const message = typeof body?.message === 'string' ? body.message : '';
  if (res.status === 429 || res.status >= 500) return classifyStatus(res, reply, now);
  if (
    res.status === 401 ||
    res.status === 402 ||
    res.status === 403 ||
    ACCOUNT_ERROR_CODES.has(code)
  )
    return { kind: 'account', reply };
  if (SENDER_REFUSED.test(message)) return { kind: 'account', reply };
  return classifyJsonApiStatus(res, reply, now);
}

export function brevoMessageId(id: string): string {
  const bare = id.trim().replace(/^<|>$/g, '');
  return `<${bare}>`;
}

function person(a: NamedAddress): { email: string; name?: string } {
  return a.name ? { email: a.email, name: a.name } : { email: a.email };
}

export function brevoBody(parts: MessageParts, job: DeliveryJob): Record<string, unknown> {
  const body: Record<string, unknown> = { sender: person(parts.from) };
  // Brevo requires `to` (a message owing only Cc recipients has them there).
  const { to, cc, bcc } = addressedRecipients(parts);
  if (to.length > 0) {
    body.to = to.map(person);
    if (cc.length > 0) body.cc = cc.map(person);
    if (bcc.length > 0) body.bcc = bcc.map(person);
  } else {
    // Only Bcc owed: one version each, addressed to them alone, so no Bcc address is shown to another.
    body.messageVersions = bcc.map((a) => ({ to: [person(a)] }));
  }
  if (parts.replyTo.length > 0) body.replyTo = person(parts.replyTo[0]);
  body.subject = parts.subject;
  if (parts.html !== null) body.htmlContent = parts.html;
  if (parts.text !== null) body.textContent = parts.text;
  if (parts.attachments.length > 0) {
    // Brevo has no Content-ID for attachments: inline images arrive as plain attachments.
    body.attachment = base64Attachments(parts).map((a) => ({
      content: a.base64,
      name: a.filename,
    }));
  }
  const headers = headerObject(parts, new Set());
  if (!Object.keys(headers).some((k) => k.toLowerCase() === BREVO_CUSTOM_HEADER.toLowerCase())) {
    headers[BREVO_CUSTOM_HEADER] = JSON.stringify({ [POSTERN_ID_FIELD]: job.messageId });
  }
  body.headers = headers;
  const tags = [...new Set([...(parts.category ? [parts.category] : []), ...parts.tags])];
  if (tags.length > 0) body.tags = tags;
  return body;
}

/** provider-f-api: Brevo rebuilds the MIME, so our DKIM signature and Message-ID do not survive. */
export class BrevoApiAdapter implements ProviderAdapter {
  constructor(private readonly deps: AdapterDeps) {}

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const { apiKey, endpoint } = apiCredentials(account);
    if (!apiKey) return missingApiKey(account.slug);
    const parts = await readMessageParts(job);
    const res = await postJson(
      `${baseUrl(endpoint, BREVO_API)}/v3/smtp/email`,
      { 'api-key': apiKey },
      brevoBody(parts, job),
      this.deps.timeoutMs,
    );
    if (!isResponse(res)) return res;
    const reply = replyText(res);
    if (res.status !== 201 && res.status !== 200 && res.status !== 202)
      return classifyBrevo(res, reply, this.deps.clock.now());
    // Sent as message versions: the first id is stored; feedback for the others matches by X-Mailin-custom.
    const answer = parseJsonObject(res.text);
    const first =
      typeof answer?.messageId === 'string'
        ? answer.messageId
        : Array.isArray(answer?.messageIds) && typeof answer.messageIds[0] === 'string'
          ? answer.messageIds[0]
          : null;
    const id = first ? brevoMessageId(first) : null;
    return { kind: 'sent', providerMessageId: id, reply, bounced: [], deferred: [] };
  }

  async close(): Promise<void> {}
}
