import { Readable } from 'node:stream';
import type { SendResult } from './adapter.js';

export interface ApiRequest {
  method: 'POST' | 'GET';
  url: string;
  headers: Record<string, string>;
  /** None for a GET. A stream is sent as it is read (chunked): a large stored body never whole in memory. */
  body?: string | Uint8Array | FormData | Readable;
  timeoutMs: number;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
}

/**
 * One request to a provider API. Network errors and timeouts come back as a `temporary`
 * result (the next candidate is tried); any HTTP answer comes back as a response for the
 * adapter to classify, since each provider words its errors its own way.
 */
export async function callProviderApi(
  request: ApiRequest,
): Promise<ApiResponse | Extract<SendResult, { kind: 'temporary' }>> {
  try {
    const streamed = request.body instanceof Readable;
    const res = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      body: (streamed ? Readable.toWeb(request.body as Readable) : request.body) as
        | BodyInit
        | undefined,
      // fetch sends a stream body only half-duplex (the answer is read once it is sent).
      ...(streamed ? { duplex: 'half' } : {}),
      redirect: 'manual',
      signal: AbortSignal.timeout(request.timeoutMs),
    } as RequestInit);
    return { status: res.status, headers: res.headers, text: await res.text() };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    const reason =
      e.name === 'TimeoutError'
        ? `timed out after ${request.timeoutMs} ms`
        : (e.cause?.code ?? e.cause?.message ?? e.message);
    return { kind: 'temporary', reply: `${new URL(request.url).host}: ${reason}` };
  }
}

export function isResponse(r: ApiResponse | SendResult): r is ApiResponse {
  return 'status' in r;
}

/**
 * Milliseconds until a throttled account may be tried again, from the headers providers use:
 * `Retry-After` (seconds or an HTTP date), `X-RateLimit-Reset` / `RateLimit-Reset`
 * (epoch seconds, or seconds from now when small), `x-sib-ratelimit-reset` (Brevo, seconds).
 */
export function retryAfterMs(headers: Headers, now: number): number | undefined {
  const retryAfter = headers.get('retry-after');
  if (retryAfter) {
    if (/^\d+(\.\d+)?$/.test(retryAfter.trim())) return Math.ceil(Number(retryAfter) * 1000);
    const at = Date.parse(retryAfter);
    if (!Number.isNaN(at)) return Math.max(0, at - now);
  }
  for (const name of ['x-ratelimit-reset', 'ratelimit-reset', 'x-sib-ratelimit-reset']) {
    const v = headers.get(name);
    if (!v || !/^\d+(\.\d+)?$/.test(v.trim())) continue;
    const n = Number(v);
    // Epoch seconds are > 1e9; anything smaller is a delay in seconds.
    return n > 1e9 ? Math.max(0, Math.ceil(n * 1000 - now)) : Math.ceil(n * 1000);
  }
  return undefined;
}

/**
 * The default reading of an HTTP status: 429 and 5xx are temporary (the reset headers say
 * when to come back), 401/403 mean the account itself is unusable (bad key, suspended), any
 * other 4xx is a refusal of this message. Adapters refine this with the provider's error codes.
 */
export function classifyStatus(
  res: ApiResponse,
  reply: string,
  now: number,
): Exclude<SendResult, { kind: 'sent' }> {
  if (res.status === 429 || res.status >= 500)
    return { kind: 'temporary', reply, retryAfterMs: retryAfterMs(res.headers, now) };
  if (res.status === 401 || res.status === 403) return { kind: 'account', reply };
  if (res.status >= 300 && res.status < 400)
    return { kind: 'account', reply: `${reply} (redirect not followed; check the endpoint)` };
  return { kind: 'permanent', reply };
}

/** A short, single-line rendering of a provider's answer for the attempts log. */
export function replyText(res: ApiResponse, max = 500): string {
  const body = res.text.replace(/\s+/g, ' ').trim();
  return `${res.status} ${body.length > max ? `${body.slice(0, max)}…` : body}`.trim();
}

/** The base URL of an account: its `--endpoint` override (tests, EU regions, proxies), else the provider's. */
export function baseUrl(endpoint: string | null, fallback: string): string {
  return (endpoint ?? fallback).replace(/\/+$/, '');
}
