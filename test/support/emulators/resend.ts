/**
 * A local Resend `POST /emails`, written from Resend's API reference and errors page: bearer
 * auth, the body fields and tag charset it validates, `Idempotency-Key` (same key and body:
 * the first answer again; same key, other body: 409), `200 {"id"}` on success and its error
 * bodies `{"statusCode","message","name"}` (429 with `ratelimit-*` and `retry-after`). Test
 * fixture only.
 */
import { createHash } from 'node:crypto';
import { type EmulatorHandler, type EmulatorReply, ProviderEmulator } from '../providerEmulator.js';

export const RESEND_TEST_KEY = 're_postern_test_d_api_key';

export interface ResendEmulatorState {
  /** Sending domains verified on the account: a From elsewhere gets Resend's 403. Unset: any. */
  verifiedDomains?: string[];
  /** The account's daily or monthly quota is spent (429 `daily_quota_exceeded` / `monthly_quota_exceeded`). */
  quotaExceeded?: 'daily' | 'monthly' | null;
  /** Another request with the same Idempotency-Key is still in progress (409 `concurrent_idempotent_requests`). */
  keyInProgress?: boolean;
  /** Seconds in `retry-after` / `ratelimit-reset` of a throttling answer. */
  retryAfterSeconds?: number;
  /** The key has sending access only (the domain list is refused with restricted_api_key). */
  sendingAccessOnly?: boolean;
  /** Emails actually accepted (an idempotent repeat is not a new one): id → request body. */
  readonly sent: Map<string, Record<string, unknown>>;
}

/** The id of the n-th accepted email: a UUID, like Resend's. */
export function resendIdFor(n: number): string {
  const h = createHash('sha256').update(`resend-emulator-${n}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const error = (
  statusCode: number,
  name: string,
  message: string,
  headers?: Record<string, string>,
): EmulatorReply => ({
  status: statusCode,
  headers,
  body: { statusCode, message, name },
});

const ADDRESS = /^(?:[^<>]*<)?[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+>?$/;
const TAG = /^[A-Za-z0-9_-]{1,256}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] | null =>
  v === undefined ? [] : typeof v === 'string' ? [v] : Array.isArray(v) ? v : null;
const emailOf = (a: string) => (/<([^<>]+)>\s*$/.exec(a)?.[1] ?? a).trim();

/** The `/emails` body as Resend validates it; null when it would be accepted. */
export function validateEmail(body: unknown): EmulatorReply | null {
  if (!isObj(body))
    return error(422, 'validation_error', 'The request body must be a JSON object.');
  for (const field of ['from', 'to', 'subject'] as const) {
    if (body[field] === undefined)
      return error(422, 'missing_required_field', `Missing \`${field}\` field.`);
  }
  if (typeof body.from !== 'string' || !ADDRESS.test(body.from)) {
    return error(
      422,
      'validation_error',
      'Invalid `from` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.',
    );
  }
  for (const field of ['to', 'cc', 'bcc', 'reply_to'] as const) {
    const l = list(body[field]);
    if (!l || l.some((a) => typeof a !== 'string' || !ADDRESS.test(a))) {
      return error(
        422,
        'validation_error',
        `Invalid \`${field}\` field. The email address needs to follow the \`email@example.com\` or \`Name <email@example.com>\` format.`,
      );
    }
    if (field === 'to' && (l.length === 0 || l.length > 50))
      return error(
        422,
        'validation_error',
        'Invalid `to` field. Provide between 1 and 50 recipients.',
      );
  }
  if (typeof body.subject !== 'string')
    return error(422, 'validation_error', 'Invalid `subject` field.');
  if (body.html === undefined && body.text === undefined)
    return error(422, 'validation_error', 'Missing `html` or `text` field.');
  for (const field of ['html', 'text'] as const) {
    if (body[field] !== undefined && typeof body[field] !== 'string')
      return error(422, 'validation_error', `Invalid \`${field}\` field.`);
  }
  if (
    body.headers !== undefined &&
    (!isObj(body.headers) || Object.values(body.headers).some((v) => typeof v !== 'string'))
  ) {
    return error(
      422,
      'validation_error',
      'Invalid `headers` field. Headers must be an object of strings.',
    );
  }
  if (body.attachments !== undefined) {
    if (!Array.isArray(body.attachments))
      return error(422, 'validation_error', 'Invalid `attachments` field.');
    for (const a of body.attachments) {
      if (!isObj(a) || (a.content === undefined && a.path === undefined))
        return error(
          422,
          'invalid_attachment',
          'Attachment must have either a `content` or `path`.',
        );
      if (a.content !== undefined && (typeof a.content !== 'string' || !BASE64.test(a.content)))
        return error(422, 'invalid_attachment', 'Attachment `content` must be a Base64 string.');
      for (const f of ['filename', 'content_type', 'content_id'] as const) {
        if (a[f] !== undefined && typeof a[f] !== 'string')
          return error(422, 'validation_error', `Invalid attachment \`${f}\` field.`);
      }
    }
  }
  if (body.tags !== undefined) {
    if (!Array.isArray(body.tags)) return error(422, 'validation_error', 'Invalid `tags` field.');
    for (const t of body.tags) {
      if (
        !isObj(t) ||
        typeof t.name !== 'string' ||
        !TAG.test(t.name) ||
        typeof t.value !== 'string' ||
        !TAG.test(t.value)
      ) {
        return error(
          422,
          'validation_error',
          'Tags should only contain ASCII letters (a–z, A–Z), numbers (0–9), underscores (_), or dashes (-), and contain no more than 256 characters.',
        );
      }
    }
  }
  return null;
}

export function resendHandler(
  state: ResendEmulatorState,
  apiKey = RESEND_TEST_KEY,
): EmulatorHandler {
  const idempotent = new Map<string, { digest: string; id: string }>();
  return (req, mode, emulator) => {
    // GET /domains (a full-access key; a sending-access key is refused with restricted_api_key): the console's connection check.
    if (req.method === 'GET' && req.url.split('?')[0] === '/domains') {
      const bearer = req.headers.authorization;
      if (!bearer?.startsWith('Bearer '))
        return error(401, 'missing_api_key', 'Missing API key in the authorization header.');
      if (bearer !== `Bearer ${apiKey}`) return error(403, 'invalid_api_key', 'API key is invalid');
      if (state.sendingAccessOnly)
        return error(401, 'restricted_api_key', 'This API key is restricted to only send emails');
      return {
        status: 200,
        body: {
          object: 'list',
          data: [
            {
              id: 'd91cd9bd-1176-453e-8fc1-35364d380206',
              name: 'example.com',
              status: 'verified',
              created_at: '2023-04-26 20:21:26.347412+00',
              region: 'us-east-1',
            },
          ],
        },
      };
    }
    if (req.url.split('?')[0] !== '/emails')
      return error(404, 'not_found', 'The requested endpoint does not exist.');
    if (req.method !== 'POST')
      return error(405, 'method_not_allowed', 'Method is not allowed for the requested path.');
    const auth = req.headers.authorization;
    if (!auth?.startsWith('Bearer '))
      return error(
        401,
        'missing_api_key',
        'Missing API key in the authorization header. Include the following header in the request: Authorization: Bearer YOUR_API_KEY',
      );
    if (auth !== `Bearer ${apiKey}`) return error(403, 'invalid_api_key', 'API key is invalid');
    const key = req.headers['idempotency-key'];
    if (key !== undefined && (typeof key !== 'string' || key.length < 1 || key.length > 256)) {
      return error(
        400,
        'invalid_idempotency_key',
        'Idempotency keys, if present, must have between 1 and 256 characters.',
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(req.body.toString('utf8'));
    } catch {
      return error(
        400,
        'validation_error',
        'An error was found with one or more fields in the request.',
      );
    }
    const invalid = validateEmail(body);
    if (invalid) return invalid;
    const from = emailOf((body as Obj).from as string).toLowerCase();
    if (
      state.verifiedDomains &&
      !state.verifiedDomains.some((d) => from.endsWith(`@${d.toLowerCase()}`))
    ) {
      return error(
        403,
        'validation_error',
        `The ${from.slice(from.indexOf('@') + 1)} domain is not verified. Please, add and verify your domain.`,
      );
    }
    if (state.keyInProgress && typeof key === 'string') {
      return error(
        409,
        'concurrent_idempotent_requests',
        'There is another request in progress with the same idempotency key.',
      );
    }
    const digest = createHash('sha256').update(req.body).digest('hex');
    const previous = typeof key === 'string' ? idempotent.get(key) : undefined;
    if (previous && previous.digest !== digest) {
      return error(
        409,
        'invalid_idempotent_request',
        "This idempotency key has been used with this HTTP method and endpoint within the last 24 hours, but the request body was modified and doesn't match the original request.",
      );
    }
    if (previous) return { status: 200, body: { id: previous.id } };
    if (state.quotaExceeded === 'daily')
      return error(
        429,
        'daily_quota_exceeded',
        'You have exceeded your daily email sending quota.',
      );
    if (state.quotaExceeded === 'monthly')
      return error(
        429,
        'monthly_quota_exceeded',
        'You have exceeded your monthly email sending quota.',
      );
    const wait = String(state.retryAfterSeconds ?? 1);
    switch (mode) {
      case 'ok': {
        const id = resendIdFor(emulator.nextId());
        state.sent.set(id, body as Obj);
        if (typeof key === 'string') idempotent.set(key, { digest, id });
        return { status: 200, body: { id } };
      }
      case 'throttle':
        return error(
          429,
          'rate_limit_exceeded',
          'Too many requests. Please limit the number of requests per second. Or contact support to increase rate limit.',
          {
            'ratelimit-limit': '2',
            'ratelimit-remaining': '0',
            'ratelimit-reset': wait,
            'retry-after': wait,
          },
        );
      case 'server_error':
        return error(500, 'application_error', 'An unexpected error occurred.');
      case 'reject':
        return error(
          422,
          'validation_error',
          'Invalid `to` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.',
        );
      case 'suspended':
        return error(403, 'suspended_api_key', 'This API key is suspended');
    }
  };
}

/** A Resend emulator on 127.0.0.1, scripted through `behave` and its `resend` state. */
export async function startResendEmulator(
  state: Partial<Omit<ResendEmulatorState, 'sent'>> = {},
  apiKey?: string,
): Promise<ProviderEmulator & { resend: ResendEmulatorState }> {
  const full: ResendEmulatorState = { ...state, sent: new Map() };
  const emulator = await ProviderEmulator.start(resendHandler(full, apiKey));
  return Object.assign(emulator, { resend: full });
}
