/** provider-b feedback: SendGrid's Signed Event Webhook, ECDSA P-256 over `timestamp + raw body` (docs/delivery.md#provider-b-api-sendgrid). */
import { createHash, createPublicKey, type KeyObject, verify } from 'node:crypto';
import {
  type FeedbackItem,
  type FeedbackKind,
  type FeedbackVerdict,
  type FeedbackVerifier,
  headerOf,
  staleness,
} from '../feedback.js';
import { MESSAGE_ID_ARG } from './adapter.js';

export const SIGNATURE_HEADER = 'x-twilio-email-event-webhook-signature';
export const TIMESTAMP_HEADER = 'x-twilio-email-event-webhook-timestamp';

/** Base64 of the DER SPKI, or a PEM. */
export function sendgridPublicKey(text: string): KeyObject {
  const trimmed = text.trim();
  if (trimmed.includes('-----BEGIN')) return createPublicKey(trimmed);
  return createPublicKey({
    key: Buffer.from(trimmed.replace(/\s+/g, ''), 'base64'),
    format: 'der',
    type: 'spki',
  });
}

export function sendgridSignatureValid(
  publicKey: string,
  timestamp: string,
  body: Buffer,
  signature: string,
): boolean {
  try {
    const payload = Buffer.concat([Buffer.from(timestamp, 'utf8'), body]);
    return verify(
      'sha256',
      payload,
      { key: sendgridPublicKey(publicKey), dsaEncoding: 'der' },
      Buffer.from(signature, 'base64'),
    );
  } catch {
    return false;
  }
}

/** The `X-Message-Id` we stored, followed by SendGrid's filter host and more: the part before the filter segment, else the first dot. */
export function sendgridMessageId(sgMessageId: string): string {
  const m = /^(.+?)\.(?:st)?filter[a-z0-9-]*\./i.exec(sgMessageId);
  return m ? m[1] : sgMessageId.split('.')[0];
}

function kindOf(event: Record<string, unknown>): FeedbackKind | null {
  switch (event.event) {
    case 'delivered':
      return 'delivered';
    case 'bounce':
      // `type: blocked` is the receiving server refusing for now (a soft bounce).
      return event.type === 'blocked' ? 'soft_bounce' : 'hard_bounce';
    case 'deferred':
      return 'soft_bounce';
    case 'dropped':
      return 'failed';
    case 'spamreport':
      return 'complaint';
    default:
      return null;
  }
}

const str = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined;

export const sendgridFeedback: FeedbackVerifier = {
  async verify(req, account, ctx): Promise<FeedbackVerdict> {
    const publicKey = account.settings.webhook_public_key;
    if (!publicKey)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'the account has no webhook public key (attach with --webhook-public-key)',
      };
    const signature = headerOf(req.headers, SIGNATURE_HEADER);
    const timestamp = headerOf(req.headers, TIMESTAMP_HEADER);
    if (!signature || !timestamp)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'missing X-Twilio-Email-Event-Webhook-Signature / -Timestamp',
      };
    if (!sendgridSignatureValid(publicKey, timestamp, req.rawBody, signature))
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'ECDSA signature does not verify',
      };
    const stale = staleness(timestamp, ctx);
    if (stale) return { ok: false, code: 'feedback:stale', reason: stale };
    // SendGrid signs every delivery attempt afresh: the same signature twice is a replay.
    if (
      !(await ctx.rememberOnce(
        account,
        `sendgrid:${createHash('sha256').update(signature).digest('hex')}`,
      ))
    ) {
      return {
        ok: false,
        code: 'feedback:replayed',
        reason: 'this signed notification was already received',
      };
    }

    let events: unknown;
    try {
      events = JSON.parse(req.rawBody.toString('utf8'));
    } catch {
      return { ok: false, code: 'feedback:malformed', reason: 'the body is not JSON' };
    }
    if (
      !Array.isArray(events) ||
      events.some((e) => !e || typeof e !== 'object' || Array.isArray(e))
    ) {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'the body is not a JSON array of events',
      };
    }

    const items: FeedbackItem[] = [];
    let ignored = 0;
    for (const e of events as Record<string, unknown>[]) {
      const kind = kindOf(e);
      const recipient = str(e.email);
      if (!kind || !recipient) {
        ignored++;
        continue;
      }
      const sgMessageId = str(e.sg_message_id);
      const ourId = str(e[MESSAGE_ID_ARG]);
      items.push({
        receiptKey: `sendgrid:${str(e.sg_event_id) ?? createHash('sha256').update(JSON.stringify(e)).digest('base64url')}`,
        kind,
        providerMessageId: sgMessageId ? sendgridMessageId(sgMessageId) : null,
        messageId: ourId && /^m\.[0-9a-z]{26}$/.test(ourId) ? ourId : null,
        recipient,
        occurredAt: typeof e.timestamp === 'number' ? e.timestamp * 1000 : ctx.clock.now(),
        detail: {
          type: str(e.type) ?? String(e.event),
          subtype: str(e.bounce_classification),
          code: str(e.status),
          reply: str(e.reason) ?? str(e.response),
        },
      });
    }
    return {
      ok: true,
      items,
      ...(ignored ? { note: `${ignored} event(s) that are not delivery feedback ignored` } : {}),
    };
  },
};
