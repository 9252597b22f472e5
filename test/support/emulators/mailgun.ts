/**
 * A Mailgun stand-in for `POST /v3/<domain>/messages.mime`, from Mailgun's API reference:
 * HTTP basic auth `api:<key>` (401 `Forbidden`, plain text, otherwise), a multipart/form-data
 * body with one or more `to` fields and the MIME file as `message` (400 `{"message": …}`
 * otherwise), `o:` options and `v:` user variables; 200
 * `{"id": "<Message-ID>", "message": "Queued. Thank you."}` (Mailgun keeps the MIME's own
 * Message-ID), 404 for a domain the key does not own. Test fixture only.
 */
import { createHmac, randomBytes } from 'node:crypto';
import {
  type EmulatorMode,
  type EmulatorReply,
  ProviderEmulator,
  type RecordedRequest,
} from '../providerEmulator.js';

export interface MultipartField {
  name: string;
  filename: string | null;
  contentType: string | null;
  value: Buffer;
}

/** A multipart/form-data body taken apart, byte-exact (fields in the order sent). */
export function parseMultipart(body: Buffer, contentType: string | undefined): MultipartField[] {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? '');
  if (!m || !/^multipart\/form-data/i.test(contentType ?? ''))
    throw new Error(`not multipart/form-data: ${contentType}`);
  const delimiter = Buffer.from(`--${m[1] ?? m[2]}`);
  const fields: MultipartField[] = [];
  let at = body.indexOf(delimiter);
  if (at < 0) throw new Error('no multipart boundary in the body');
  for (;;) {
    at += delimiter.length;
    if (body.subarray(at, at + 2).toString() === '--') break;
    at += 2; // CRLF after the delimiter
    const headerEnd = body.indexOf('\r\n\r\n', at);
    if (headerEnd < 0) throw new Error('unterminated part headers');
    const headers = body.subarray(at, headerEnd).toString('utf8');
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), headerEnd + 4);
    if (next < 0) throw new Error('unterminated part');
    const disposition = /^content-disposition:\s*form-data;(.*)$/im.exec(headers)?.[1] ?? '';
    const name = /\bname="([^"]*)"/.exec(disposition)?.[1];
    if (name === undefined) throw new Error(`a part without a name: ${headers}`);
    fields.push({
      name,
      filename: /\bfilename="([^"]*)"/.exec(disposition)?.[1] ?? null,
      contentType: /^content-type:\s*(.+)$/im.exec(headers)?.[1].trim() ?? null,
      value: body.subarray(headerEnd + 4, next),
    });
    at = next + 2;
  }
  return fields;
}

export interface MailgunEmulatorOptions {
  apiKey: string;
  domain: string;
  /** A `Retry-After` header on 429s. Mailgun documents no reset header; the adapter honours a standard one when present. */
  retryAfterSeconds?: number;
  /** The key is a domain sending key: it may send, and nothing else (the domain lookup is refused). */
  sendingKeyOnly?: boolean;
  /** The domain's state in the domain lookup (default `active`). */
  domainState?: string;
}

const json = (status: number, body: unknown, headers?: Record<string, string>): EmulatorReply => ({
  status,
  body,
  headers,
});

export function mailgunHandler(opts: MailgunEmulatorOptions) {
  return (req: RecordedRequest, mode: EmulatorMode, emu: ProviderEmulator): EmulatorReply => {
    // GET /v3/domains/{domain} (a private API key only; a domain sending key may only send): the console's connection check.
    const domainPath = /^\/v3\/domains\/([^/]+)$/.exec(req.url.split('?')[0]);
    if (req.method === 'GET' && domainPath) {
      if (
        req.headers.authorization !==
          `Basic ${Buffer.from(`api:${opts.apiKey}`).toString('base64')}` ||
        opts.sendingKeyOnly
      )
        return { status: 401, body: 'Forbidden' };
      const name = decodeURIComponent(domainPath[1]);
      if (name !== opts.domain) return json(404, { message: 'Domain not found' });
      return json(200, {
        domain: {
          name,
          state: opts.domainState ?? 'active',
          type: 'custom',
          spam_action: 'disabled',
        },
        receiving_dns_records: [],
        sending_dns_records: [],
      });
    }
    const path = /^\/v3\/([^/]+)\/messages\.mime$/.exec(req.url.split('?')[0]);
    if (!path) return json(404, { message: 'Not Found' });
    if (req.method !== 'POST') return json(405, { message: 'Method Not Allowed' });
    const expected = `Basic ${Buffer.from(`api:${opts.apiKey}`).toString('base64')}`;
    if (req.headers.authorization !== expected) return { status: 401, body: 'Forbidden' };
    const domain = decodeURIComponent(path[1]);
    if (domain !== opts.domain) return json(404, { message: `Domain not found: ${domain}` });
    let fields: MultipartField[];
    try {
      fields = parseMultipart(req.body, req.headers['content-type']);
    } catch {
      return json(400, { message: 'The request is not multipart/form-data' });
    }
    const to = fields.filter((f) => f.name === 'to').map((f) => f.value.toString('utf8'));
    const message = fields.find((f) => f.name === 'message');
    if (to.length === 0) return json(400, { message: "'to' parameter is missing" });
    if (!message || message.filename === null)
      return json(400, { message: "'message' parameter is missing" });
    switch (mode) {
      case 'throttle':
        return json(
          429,
          { message: 'Too many requests' },
          opts.retryAfterSeconds !== undefined
            ? { 'retry-after': String(opts.retryAfterSeconds) }
            : undefined,
        );
      case 'server_error':
        return json(503, { message: 'Service Unavailable' });
      case 'reject':
        return json(400, {
          message: "'from' parameter is not a valid address. please check documentation",
        });
      case 'suspended':
        return json(403, {
          message: `Domain ${domain} is not allowed to send: Free accounts are for test purposes only. Please upgrade or add the address to authorized recipients in Account Settings.`,
        });
      case 'ok': {
        const head = message.value.toString('latin1').split('\r\n\r\n')[0];
        const own = /^message-id:\s*(<[^>\r\n]+>)/im.exec(head)?.[1];
        const id =
          own ??
          `<20260302100000.${emu.nextId()}.${randomBytes(6).toString('hex').toUpperCase()}@${domain}>`;
        return json(200, { id, message: 'Queued. Thank you.' });
      }
    }
  };
}

export function startMailgunEmulator(opts: MailgunEmulatorOptions): Promise<ProviderEmulator> {
  return ProviderEmulator.start(mailgunHandler(opts));
}

/** A webhook body signed the way Mailgun signs it: HMAC-SHA256(key, timestamp + token), hex. */
export function signedMailgunWebhook(
  eventData: unknown,
  signingKey: string,
  opts: { timestamp: number; token?: string },
): string {
  const timestamp = String(opts.timestamp);
  const token = opts.token ?? randomBytes(25).toString('hex');
  const signature = createHmac('sha256', signingKey)
    .update(timestamp + token)
    .digest('hex');
  return JSON.stringify({ signature: { token, timestamp, signature }, 'event-data': eventData });
}
