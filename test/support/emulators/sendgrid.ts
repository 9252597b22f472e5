/**
 * A local SendGrid v3 Mail Send (`POST /v3/mail/send`), written from SendGrid's API reference
 * and Mail Send errors page: bearer auth, the request shape SendGrid validates, its error
 * bodies (`{"errors":[{"message","field","help"}]}`), `202` with an empty body and
 * `X-Message-Id` on success, and `429` with `X-RateLimit-*` when throttling. Test fixture only.
 */
import { createHash } from 'node:crypto';
import { type EmulatorHandler, type EmulatorReply, ProviderEmulator } from '../providerEmulator.js';

export const SENDGRID_TEST_KEY = 'SG.postern-test.b-api-key';

export interface SendgridEmulatorOptions {
  apiKey?: string;
  /** Sender identities (addresses, or `@domain`): a From outside them gets SendGrid's 403. Unset: any sender. */
  verifiedSenders?: string[];
  /** The clock behind `X-RateLimit-Reset` (epoch seconds). */
  now?: () => number;
  /** Seconds until the rate limit resets, in a throttling answer. */
  resetAfterSeconds?: number;
  /** The key's scopes in GET /v3/scopes (default: mail.send and user.profile.read). */
  scopes?: string[];
}

/** The X-Message-Id of the n-th accepted message: 22 base64url characters, like SendGrid's. */
export const sendgridMessageIdFor = (n: number) =>
  createHash('sha256').update(`sendgrid-emulator-${n}`).digest('base64url').slice(0, 22);

const DOCS = 'http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html';
const error = (
  status: number,
  message: string,
  field: string | null = null,
  help: string | null = null,
): EmulatorReply => ({
  status,
  body: { errors: [{ message, field, help }] },
});

const RESERVED_HEADERS = [
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
];
const EMAIL = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkAddresses(
  list: unknown,
  field: string,
  seen: Set<string>,
  required: boolean,
): EmulatorReply | null {
  if (list === undefined && !required) return null;
  if (!Array.isArray(list) || (required && list.length === 0)) {
    return error(
      400,
      'The to array is required for all personalization objects, and must have at least one email object with a valid email address.',
      field,
      `${DOCS}#message.personalizations.to`,
    );
  }
  for (const [i, a] of list.entries()) {
    if (!isObj(a) || typeof a.email !== 'string' || !EMAIL.test(a.email))
      return error(400, 'Does not contain a valid address.', `${field}.${i}.email`);
    if (a.name !== undefined && typeof a.name !== 'string')
      return error(400, 'Invalid type. Expected: string, given: other.', `${field}.${i}.name`);
    const key = a.email.toLowerCase();
    if (seen.has(key)) {
      return error(
        400,
        `Each email address in the personalization block should be unique between to, cc, and bcc. We found the first duplicate instance of [${a.email}] in the ${field} field.`,
        field,
      );
    }
    seen.add(key);
  }
  return null;
}

/** The Mail Send request as SendGrid validates it; null when it would be accepted. */
export function validateMailSend(body: unknown): EmulatorReply | null {
  if (!isObj(body)) return error(400, 'Bad Request', null);
  const ps = body.personalizations;
  if (!Array.isArray(ps) || ps.length === 0)
    return error(
      400,
      'The personalizations field is required and must have at least one personalization.',
      'personalizations',
      `${DOCS}#-Personalizations-Errors`,
    );
  if (ps.length > 1000)
    return error(
      400,
      `The personalization block is limited to 1000 personalizations per API request. You have provided ${ps.length} personalizations.`,
      'personalizations',
    );
  for (const [i, p] of ps.entries()) {
    if (!isObj(p)) return error(400, 'Invalid type. Expected: object.', `personalizations.${i}`);
    const seen = new Set<string>();
    const bad =
      checkAddresses(p.to, `personalizations.${i}.to`, seen, true) ??
      checkAddresses(p.cc, `personalizations.${i}.cc`, seen, false) ??
      checkAddresses(p.bcc, `personalizations.${i}.bcc`, seen, false);
    if (bad) return bad;
  }
  if (!isObj(body.from) || typeof body.from.email !== 'string' || !EMAIL.test(body.from.email)) {
    return error(
      400,
      'The from object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.',
      'from',
      `${DOCS}#message.from`,
    );
  }
  if (body.reply_to !== undefined && body.reply_to_list !== undefined)
    return error(
      400,
      'The reply_to and reply_to_list properties are mutually exclusive.',
      'reply_to',
    );
  const list = body.reply_to_list;
  if (
    list !== undefined &&
    (!Array.isArray(list) ||
      list.some((a) => !isObj(a) || typeof a.email !== 'string' || !EMAIL.test(a.email)))
  )
    return error(400, 'Does not contain a valid address.', 'reply_to_list');
  if (
    body.reply_to !== undefined &&
    (!isObj(body.reply_to) ||
      typeof body.reply_to.email !== 'string' ||
      !EMAIL.test(body.reply_to.email))
  )
    return error(400, 'Does not contain a valid address.', 'reply_to.email');
  if (typeof body.subject !== 'string' || body.subject === '') {
    if (!ps.every((p) => isObj(p) && typeof p.subject === 'string' && p.subject !== '')) {
      return error(
        400,
        'The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.',
        'subject',
        `${DOCS}#message.subject`,
      );
    }
  }
  const content = body.content;
  if (!Array.isArray(content) || content.length === 0) {
    return error(
      400,
      'Unless a valid template_id is provided, the content parameter is required. There must be at least one defined content block. We typically suggest both text/plain and text/html blocks are included, but only one block is required.',
      'content',
      `${DOCS}#message.content`,
    );
  }
  const types = content.map((c) => (isObj(c) ? c.type : undefined));
  for (const [i, c] of content.entries()) {
    if (!isObj(c) || typeof c.type !== 'string' || c.type === '')
      return error(400, 'The content type must be provided.', `content.${i}.type`);
    if (typeof c.value !== 'string' || c.value === '')
      return error(
        400,
        'The content value must be a string at least one character in length.',
        `content.${i}.value`,
        `${DOCS}#message.content.value`,
      );
  }
  if (
    types.filter((t) => t === 'text/plain').length > 1 ||
    types.filter((t) => t === 'text/html').length > 1
  )
    return error(400, 'If present, text/plain and text/html may only be provided once.', 'content');
  const plain = types.indexOf('text/plain');
  const html = types.indexOf('text/html');
  if (plain > 0 || (html >= 0 && html !== (plain === 0 ? 1 : 0)))
    return error(
      400,
      'If present, text/plain content must be first, followed by text/html, followed by any other content.',
      'content',
    );
  if (body.attachments !== undefined) {
    if (!Array.isArray(body.attachments))
      return error(400, 'Invalid type. Expected: array.', 'attachments');
    for (const [i, a] of body.attachments.entries()) {
      if (!isObj(a) || typeof a.content !== 'string' || a.content === '' || !BASE64.test(a.content))
        return error(
          400,
          'The attachment content must be base64 encoded.',
          `attachments.${i}.content`,
          `${DOCS}#message.attachments.content`,
        );
      if (typeof a.filename !== 'string' || a.filename === '')
        return error(
          400,
          'The attachment filename parameter is required.',
          `attachments.${i}.filename`,
        );
      if (
        a.disposition !== undefined &&
        a.disposition !== 'inline' &&
        a.disposition !== 'attachment'
      )
        return error(
          400,
          'The disposition of your attachment can be either "inline" or "attachment".',
          `attachments.${i}.disposition`,
        );
      if (a.disposition === 'inline' && (typeof a.content_id !== 'string' || a.content_id === ''))
        return error(
          400,
          'The content_id parameter is required if the disposition is set to inline.',
          `attachments.${i}.content_id`,
        );
    }
  }
  if (body.categories !== undefined) {
    const cats = body.categories;
    if (!Array.isArray(cats) || cats.some((c) => typeof c !== 'string' || c.length > 255))
      return error(400, 'A category cannot exceed 255 characters.', 'categories');
    if (cats.length > 10)
      return error(
        400,
        'Too many categories. The maximum number of categories is 10.',
        'categories',
      );
    if (new Set(cats).size !== cats.length)
      return error(400, 'The categories must be unique.', 'categories');
  }
  if (body.custom_args !== undefined) {
    if (
      !isObj(body.custom_args) ||
      Object.values(body.custom_args).some((v) => typeof v !== 'string')
    )
      return error(400, 'Custom args values must be strings.', 'custom_args');
    if (Buffer.byteLength(JSON.stringify(body.custom_args)) > 10_000)
      return error(400, 'The custom arguments may not exceed 10,000 bytes.', 'custom_args');
  }
  if (body.headers !== undefined) {
    if (!isObj(body.headers) || Object.values(body.headers).some((v) => typeof v !== 'string'))
      return error(400, 'Invalid type. Expected: object of strings.', 'headers');
    const reserved = Object.keys(body.headers).find((k) =>
      RESERVED_HEADERS.includes(k.toLowerCase()),
    );
    if (reserved)
      return error(
        400,
        `The following header is reserved and cannot be overwritten: ${reserved}.`,
        'headers',
        `${DOCS}#message.headers`,
      );
  }
  return null;
}

/** The handler reads `opts` at every request: a test may change them between requests. */
export function sendgridHandler(opts: SendgridEmulatorOptions = {}): EmulatorHandler {
  return (req, mode, emulator) => {
    const apiKey = opts.apiKey ?? SENDGRID_TEST_KEY;
    const path = req.url.split('?')[0];
    // GET /v3/scopes (the scopes of the key): the console's connection check.
    if (req.method === 'GET' && path === '/v3/scopes') {
      if (req.headers.authorization !== `Bearer ${apiKey}`)
        return error(401, 'authorization required', null);
      return { status: 200, body: { scopes: opts.scopes ?? ['mail.send', 'user.profile.read'] } };
    }
    if (path !== '/v3/mail/send') return error(404, 'not found', null);
    if (req.method !== 'POST') return error(405, 'method not allowed', null);
    const auth = req.headers.authorization;
    if (!auth) return error(401, 'authorization required', null);
    if (auth !== `Bearer ${apiKey}`)
      return error(401, 'The provided authorization grant is invalid, expired, or revoked', null);
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json'))
      return error(415, 'Content-Type should be application/json.', null);
    let body: unknown;
    try {
      body = JSON.parse(req.body.toString('utf8'));
    } catch {
      return error(400, 'Bad Request', null);
    }
    const invalid = validateMailSend(body);
    if (invalid) return invalid;
    const from = ((body as Obj).from as Obj).email as string;
    if (
      opts.verifiedSenders &&
      !opts.verifiedSenders.some((s) =>
        s.startsWith('@')
          ? from.toLowerCase().endsWith(s.toLowerCase())
          : s.toLowerCase() === from.toLowerCase(),
      )
    ) {
      return error(
        403,
        'The from address does not match a verified Sender Identity. Mail cannot be sent until this error is resolved. Visit https://sendgrid.com/docs/for-developers/sending-email/sender-identity/ to see the Sender Identity requirements',
        'from',
      );
    }
    switch (mode) {
      case 'ok':
        return {
          status: 202,
          headers: { 'x-message-id': sendgridMessageIdFor(emulator.nextId()) },
          body: '',
        };
      case 'throttle': {
        const reset = Math.floor((opts.now ?? Date.now)() / 1000) + (opts.resetAfterSeconds ?? 60);
        return {
          status: 429,
          headers: {
            'x-ratelimit-limit': '600',
            'x-ratelimit-remaining': '0',
            'x-ratelimit-reset': String(reset),
          },
          body: { errors: [{ field: null, message: 'too many requests' }] },
        };
      }
      case 'server_error':
        return { status: 500, body: { errors: [{ message: 'internal server error' }] } };
      case 'reject':
        return error(
          400,
          'The content value must be a string at least one character in length.',
          'content.0.value',
          `${DOCS}#message.content.value`,
        );
      case 'suspended':
        return error(401, 'The provided authorization grant is invalid, expired, or revoked', null);
    }
  };
}

export type SendgridEmulator = ProviderEmulator & { sendgrid: SendgridEmulatorOptions };

/** A SendGrid emulator on 127.0.0.1, scripted through `behave` and its `sendgrid` options. */
export async function startSendgridEmulator(
  opts: SendgridEmulatorOptions = {},
): Promise<SendgridEmulator> {
  const emulator = await ProviderEmulator.start(sendgridHandler(opts));
  return Object.assign(emulator, { sendgrid: opts });
}
