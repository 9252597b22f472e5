/**
 * What the JSON provider APIs (provider-b: SendGrid, provider-d: Resend) share: the account's
 * credentials, the recipient lists they want, attachments as base64, the request itself, and the
 * statuses every JSON API words alike.
 */
import type { ProviderAccount } from '../contract/providerAccount.js';
import type { SendResult } from './adapter.js';
import { callProviderApi, classifyStatus, type ApiResponse } from './httpApi.js';
import type { MessageParts, NamedAddress } from './messageParts.js';

export interface ApiCredentials {
  apiKey: string | null;
  endpoint: string | null;
  region: string | null;
}

export function apiCredentials({ settings, secrets }: ProviderAccount): ApiCredentials {
  return { apiKey: secrets.api_key ?? null, endpoint: settings.endpoint, region: settings.region };
}

/**
 * To, Cc and Bcc as the APIs want them: each address once (the first list naming it keeps it:
 * SendGrid refuses an address twice). Both APIs require a To. When no To recipient is owed (a
 * retry after they were served, or suppressed), the Cc recipients, visible to each other
 * anyway, become the To; with only Bcc recipients left `to` is empty and the adapter sends
 * each of them a copy addressed to themselves alone, so no Bcc address is ever shown.
 */
export function addressedRecipients(parts: MessageParts): { to: NamedAddress[]; cc: NamedAddress[]; bcc: NamedAddress[] } {
  const seen = new Set<string>();
  const keep = (list: NamedAddress[]) =>
    list.filter((a) => {
      const key = a.email.toLowerCase();
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  const to = keep(parts.to);
  const cc = keep(parts.cc);
  const bcc = keep(parts.bcc);
  return to.length > 0 ? { to, cc, bcc } : { to: cc, cc: [], bcc };
}

/**
 * The custom headers as one JSON object: a name the provider reserves is left out, and a
 * name repeated in the message is carried once (its first value), as JSON objects allow.
 */
export function headerObject(parts: MessageParts, reserved: ReadonlySet<string>): Record<string, string> {
  const out: Record<string, string> = {};
  const taken = new Set<string>();
  for (const h of parts.headers) {
    const key = h.name.toLowerCase();
    if (reserved.has(key) || taken.has(key)) continue;
    taken.add(key);
    out[h.name] = h.value;
  }
  return out;
}

/** RFC 5322 `atext` plus spaces: a display name that needs no quotes. */
const PLAIN_PHRASE = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~ ]+$/;

/** `Name <email>` (quoted only when the name needs it), or the bare address. */
export function nameAddr(a: NamedAddress): string {
  if (!a.name) return a.email;
  const name = PLAIN_PHRASE.test(a.name) ? a.name : `"${a.name.replace(/["\\]/g, '\\$&')}"`;
  return `${name} <${a.email}>`;
}

export interface Base64Attachment {
  filename: string;
  contentType: string;
  base64: string;
  /** The Content-ID of an inline (`cid:`) part; null for a plain attachment. */
  inlineContentId: string | null;
}

export function base64Attachments(parts: MessageParts): Base64Attachment[] {
  return parts.attachments.map((a) => ({
    filename: a.filename,
    contentType: a.contentType,
    base64: a.content.toString('base64'),
    inlineContentId: a.inline && a.contentId ? a.contentId : null,
  }));
}

/** POSTs a JSON body; `auth` holds the provider's credential header(s) and any extra request headers. */
export function postJson(url: string, auth: Record<string, string>, body: unknown, timeoutMs: number) {
  return callProviderApi({
    method: 'POST',
    url,
    headers: { ...auth, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
    timeoutMs,
  });
}

export const bearer = (apiKey: string): Record<string, string> => ({ authorization: `Bearer ${apiKey}` });

export function parseJsonObject(text: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * The default reading, plus: 404/405 mean the account's endpoint is wrong (a misconfigured
 * `--endpoint`), never that this message is bad; the next account may well take it.
 */
export function classifyJsonApiStatus(res: ApiResponse, reply: string, now: number): Exclude<SendResult, { kind: 'sent' }> {
  if (res.status === 404 || res.status === 405) return { kind: 'account', reply: `${reply} (check the account's endpoint)` };
  return classifyStatus(res, reply, now);
}

export const missingApiKey = (slug: string): Extract<SendResult, { kind: 'account' }> => ({ kind: 'account', reply: `${slug}: the account has no API key` });
