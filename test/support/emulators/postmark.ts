/**
 * A Postmark stand-in for `POST /email`, from Postmark's API reference: the server token in
 * `X-Postmark-Server-Token` (401 with ErrorCode 10 otherwise), `Accept` and `Content-Type`
 * `application/json` (ErrorCode 409), the JSON email (ErrorCode 402 for invalid JSON, 300 for
 * an invalid request: no From, no recipient, no body, over 50 recipients, a header or attachment
 * of the wrong shape), a message stream the server has (ErrorCode 1235); 200
 * `{"To", "SubmittedAt", "MessageID", "ErrorCode": 0, "Message": "OK"}`. Errors are 422
 * `{"ErrorCode", "Message"}`, rate limiting 429, server trouble 500. Test fixture only.
 */
import { randomUUID } from 'node:crypto';
import {
  type EmulatorMode,
  type EmulatorReply,
  ProviderEmulator,
  type RecordedRequest,
} from '../providerEmulator.js';

export interface PostmarkEmulatorOptions {
  serverToken: string;
  /** Message streams the server has (default: `outbound`). */
  streams?: string[];
  /** Addresses Postmark has marked inactive (a 406 when a message is sent to them). */
  inactive?: string[];
}

const error = (status: number, code: number, message: string): EmulatorReply => ({
  status,
  body: { ErrorCode: code, Message: message },
});

const addressesIn = (v: unknown): string[] =>
  typeof v === 'string' && v.trim() !== ''
    ? v.split(',').map((a) => (/<([^>]+)>/.exec(a)?.[1] ?? a).trim().replace(/^"|"$/g, ''))
    : [];

export function postmarkHandler(opts: PostmarkEmulatorOptions) {
  const streams = new Set(opts.streams ?? ['outbound']);
  const inactive = new Set((opts.inactive ?? []).map((a) => a.toLowerCase()));
  return (req: RecordedRequest, mode: EmulatorMode, _emu: ProviderEmulator): EmulatorReply => {
    // GET /server ("Get the server" the token belongs to): the console's connection check.
    if (req.method === 'GET' && req.url.split('?')[0] === '/server') {
      if (req.headers['x-postmark-server-token'] !== opts.serverToken)
        return error(401, 10, 'Request does not contain a valid Server token.');
      return {
        status: 200,
        body: {
          ID: 1,
          Name: 'Production',
          ApiTokens: [opts.serverToken],
          Color: 'blue',
          SmtpApiActivated: true,
          DeliveryType: 'Live',
        },
      };
    }
    if (req.url.split('?')[0] !== '/email')
      return { status: 404, body: { ErrorCode: 404, Message: 'Not Found' } };
    if (req.method !== 'POST')
      return { status: 405, body: { ErrorCode: 405, Message: 'Method not allowed' } };
    if (req.headers['x-postmark-server-token'] !== opts.serverToken) {
      return error(
        401,
        10,
        'Request does not contain a valid Server token. Please refer to https://postmarkapp.com/developer/api/overview#authentication',
      );
    }
    if (
      !/application\/json/i.test(String(req.headers['content-type'])) ||
      !/application\/json/i.test(String(req.headers.accept))
    ) {
      return error(
        422,
        409,
        "Your HTTP request doesn't have the Accept and Content-Type headers set to application/json.",
      );
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(req.body.toString('utf8'));
    } catch {
      return error(422, 402, 'Received invalid JSON input.');
    }
    if (typeof body.From !== 'string' || body.From === '')
      return error(422, 300, "Invalid 'From' address: ''.");
    const recipients = [...addressesIn(body.To), ...addressesIn(body.Cc), ...addressesIn(body.Bcc)];
    if (recipients.length === 0) return error(422, 300, 'Zero recipients specified');
    if (recipients.length > 50)
      return error(422, 300, 'Maximum of 50 recipients allowed per email message');
    if (typeof body.TextBody !== 'string' && typeof body.HtmlBody !== 'string')
      return error(422, 300, 'Provide either email TextBody or HtmlBody or both.');
    if (
      body.Headers !== undefined &&
      !(
        Array.isArray(body.Headers) &&
        body.Headers.every((h) => typeof h?.Name === 'string' && typeof h?.Value === 'string')
      )
    ) {
      return error(422, 300, "Invalid 'Headers' value.");
    }
    if (
      body.Attachments !== undefined &&
      !(
        Array.isArray(body.Attachments) &&
        body.Attachments.every(
          (a) =>
            typeof a?.Name === 'string' &&
            typeof a?.Content === 'string' &&
            typeof a?.ContentType === 'string',
        )
      )
    ) {
      return error(422, 300, "Invalid 'Attachments' value.");
    }
    const stream = typeof body.MessageStream === 'string' ? body.MessageStream : 'outbound';
    if (!streams.has(stream))
      return error(422, 1235, "The 'MessageStream' provided does not exist on this server.");
    const dead = recipients.filter((r) => inactive.has(r.toLowerCase()));
    if (dead.length > 0) {
      return error(
        422,
        406,
        `You tried to send to recipient(s) that have been marked as inactive. Found inactive addresses: ${dead.join(', ')}. Inactive recipients are ones that have generated a hard bounce, a spam complaint, or a manual suppression.`,
      );
    }
    switch (mode) {
      case 'throttle':
        return error(
          429,
          429,
          'Rate limit exceeded. Please reduce the concurrency and request rate of your requests.',
        );
      case 'server_error':
        return error(500, 0, 'Internal server error.');
      case 'reject':
        return error(
          422,
          300,
          "Error parsing 'To': Illegal email address 'rcpt@example'. It must contain the '@' symbol.",
        );
      case 'suspended':
        return error(422, 405, 'Not allowed to send: your account has run out of credits.');
      case 'ok':
        return {
          status: 200,
          body: {
            ...(typeof body.To === 'string' ? { To: body.To } : {}),
            SubmittedAt: '2026-03-02T05:00:00.0000000-05:00',
            MessageID: randomUUID(),
            ErrorCode: 0,
            Message: 'OK',
          },
        };
    }
  };
}

export function startPostmarkEmulator(opts: PostmarkEmulatorOptions): Promise<ProviderEmulator> {
  return ProviderEmulator.start(postmarkHandler(opts));
}
