import type { ProviderAccount } from '../contract/providerAccount.js';
import type { SendResult } from './adapter.js';
import { type ApiResponse, callProviderApi, classifyStatus } from './httpApi.js';
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
 * Each address once (SendGrid refuses one twice). Both APIs require a To: when none is owed, the Cc become the To;
 * with only Bcc left `to` is empty and each gets a copy addressed to themselves alone, so no Bcc address is shown.
 */
export function addressedRecipients(parts: MessageParts): {
  to: NamedAddress[];
  cc: NamedAddress[];
  bcc: NamedAddress[];
} {
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

/** Reserved names left out; a repeated name carried once (its first value). */
export function headerObject(
  parts: MessageParts,
  reserved: ReadonlySet<string>,
): Record<string, string> {
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

export function nameAddr(a: NamedAddress): string {
  if (!a.name) return a.email;
  const name = PLAIN_PHRASE.test(a.name) ? a.name : `"${a.name.replace(/["\\]/g, '\\$&')}"`;
  return `${name} <${a.email}>`;
}

export interface Base64Attachment {
  filename: string;
  contentType: string;
  base64: string;
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

export function postJson(
  url: string,
  auth: Record<string, string>,
  body: unknown,
  timeoutMs: number,
) {
  return callProviderApi({
    method: 'POST',
    url,
    headers: { ...auth, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
    timeoutMs,
  });
}

export const bearer = (apiKey: string): Record<string, string> => ({
  authorization: `Bearer ${apiKey}`,
});

export function parseJsonObject(text: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Plus: 404/405 mean a misconfigured `--endpoint`, never a bad message; the next account may take it. */
export function classifyJsonApiStatus(
  res: ApiResponse,
  reply: string,
  now: number,
): Exclude<SendResult, { kind: 'sent' }> {
  if (res.status === 404 || res.status === 405)
    return { kind: 'account', reply: `${reply} (check the account's endpoint)` };
  return classifyStatus(res, reply, now);
}

export const missingApiKey = (slug: string): Extract<SendResult, { kind: 'account' }> => ({
  kind: 'account',
  reply: `${slug}: the account has no API key`,
});
