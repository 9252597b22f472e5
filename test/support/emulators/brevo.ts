/**
 * A Brevo stand-in for `POST /v3/smtp/email`, from Brevo's API reference: the key in the
 * `api-key` header (401 `unauthorized` otherwise), a JSON body with `sender`, `to` (or
 * `messageVersions`), `subject` and `htmlContent` or `textContent` (400 `missing_parameter` /
 * `invalid_parameter` otherwise), attachments with a `name` and base64 `content` of an allowed
 * extension; 201 `{"messageId": "<…@smtp-relay.mailin.fr>"}` (`messageIds` for message
 * versions). Errors are `{"code", "message"}`; 429 carries `x-sib-ratelimit-*`. Test fixture only.
 */
import {
  type EmulatorMode,
  type EmulatorReply,
  ProviderEmulator,
  type RecordedRequest,
} from '../providerEmulator.js';

export interface BrevoEmulatorOptions {
  apiKey: string;
  /** Seconds in `x-sib-ratelimit-reset` on 429s. */
  rateLimitResetSeconds?: number;
  /** Sender addresses the account has validated (default: any). */
  validatedSenders?: string[];
}

const ALLOWED_EXTENSIONS = new Set(
  'xlsx xls ods docx docm doc csv pdf txt gif jpg jpeg png tif tiff rtf bmp cgm css shtml html htm zip xml ppt pptx tar ez ics mobi msg pub eps odt mp3 m4a m4v wma ogg flac wav aif aifc aiff mp4 mov avi mkv mpeg mpg wmv pkpass xlsm'.split(
    ' ',
  ),
);

const error = (
  status: number,
  code: string,
  message: string,
  headers?: Record<string, string>,
): EmulatorReply => ({ status, body: { code, message }, headers });

const isPerson = (p: unknown): boolean =>
  !!p && typeof p === 'object' && typeof (p as { email?: unknown }).email === 'string';

export function brevoHandler(opts: BrevoEmulatorOptions) {
  return (req: RecordedRequest, mode: EmulatorMode, emu: ProviderEmulator): EmulatorReply => {
    // GET /v3/account ("Get your account information, plan and credits details"): the console's connection check.
    if (req.method === 'GET' && req.url.split('?')[0] === '/v3/account') {
      if (req.headers['api-key'] !== opts.apiKey)
        return error(401, 'unauthorized', 'Key not found');
      return {
        status: 200,
        body: {
          email: 'ops@example.com',
          firstName: 'Ops',
          lastName: 'Team',
          companyName: 'Example',
          plan: [{ type: 'free', credits: 300, creditsType: 'sendLimit' }],
        },
      };
    }
    if (req.url.split('?')[0] !== '/v3/smtp/email')
      return error(404, 'document_not_found', 'Not found');
    if (req.method !== 'POST') return error(405, 'method_not_allowed', 'Method not allowed');
    if (req.headers['api-key'] !== opts.apiKey) return error(401, 'unauthorized', 'Key not found');
    if (!/application\/json/i.test(String(req.headers['content-type'])))
      return error(406, 'not_acceptable', 'Content-Type must be application/json');
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(req.body.toString('utf8'));
    } catch {
      return error(400, 'bad_request', 'Input must be a valid JSON object');
    }
    if (!isPerson(body.sender)) return error(400, 'missing_parameter', 'sender is missing');
    const sender = (body.sender as { email: string }).email;
    if (opts.validatedSenders && !opts.validatedSenders.includes(sender)) {
      return error(
        400,
        'invalid_parameter',
        `Sending has been rejected because the sender you used ${sender} is not valid. Validate your sender or authenticate your domain`,
      );
    }
    const versions = Array.isArray(body.messageVersions)
      ? (body.messageVersions as { to?: unknown }[])
      : null;
    if (versions) {
      if (
        versions.length === 0 ||
        !versions.every((v) => Array.isArray(v.to) && v.to.length > 0 && v.to.every(isPerson))
      )
        return error(400, 'invalid_parameter', 'messageVersions to is invalid');
    } else if (!Array.isArray(body.to) || body.to.length === 0 || !body.to.every(isPerson)) {
      return error(400, 'missing_parameter', 'to is missing');
    }
    for (const list of ['cc', 'bcc'] as const) {
      if (
        body[list] !== undefined &&
        !(Array.isArray(body[list]) && (body[list] as unknown[]).every(isPerson))
      )
        return error(400, 'invalid_parameter', `${list} is invalid`);
    }
    if (typeof body.subject !== 'string' || body.subject === '')
      return error(400, 'missing_parameter', 'subject is missing');
    if (typeof body.htmlContent !== 'string' && typeof body.textContent !== 'string')
      return error(400, 'missing_parameter', 'htmlContent is missing');
    if (body.attachment !== undefined) {
      if (!Array.isArray(body.attachment))
        return error(400, 'invalid_parameter', 'attachment is invalid');
      for (const a of body.attachment as { name?: unknown; content?: unknown }[]) {
        if (typeof a.name !== 'string' || typeof a.content !== 'string')
          return error(400, 'invalid_parameter', 'attachment name and content are required');
        const ext = a.name.includes('.')
          ? a.name.slice(a.name.lastIndexOf('.') + 1).toLowerCase()
          : '';
        if (!ALLOWED_EXTENSIONS.has(ext))
          return error(
            400,
            'invalid_parameter',
            `Unsupported file extension ${ext || '(none)'} for ${a.name}`,
          );
      }
    }
    if (
      body.headers !== undefined &&
      (typeof body.headers !== 'object' || Array.isArray(body.headers))
    )
      return error(400, 'invalid_parameter', 'headers is invalid');
    switch (mode) {
      case 'throttle':
        return error(429, 'too_many_requests', 'Too many requests', {
          'x-sib-ratelimit-limit': '10',
          'x-sib-ratelimit-remaining': '0',
          'x-sib-ratelimit-reset': String(opts.rateLimitResetSeconds ?? 1),
        });
      case 'server_error':
        return error(500, 'internal_error', 'Internal server error');
      case 'reject':
        return error(400, 'invalid_parameter', 'email is not valid in to');
      case 'suspended':
        return error(
          403,
          'permission_denied',
          'Your account is not activated. Please contact our support team.',
        );
      case 'ok': {
        const id = () =>
          `<202603021000.${String(emu.nextId()).padStart(11, '0')}@smtp-relay.mailin.fr>`;
        return {
          status: 201,
          body: versions ? { messageIds: versions.map(id) } : { messageId: id() },
        };
      }
    }
  };
}

export function startBrevoEmulator(opts: BrevoEmulatorOptions): Promise<ProviderEmulator> {
  return ProviderEmulator.start(brevoHandler(opts));
}
