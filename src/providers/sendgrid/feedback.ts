/**
 * provider-b feedback: SendGrid's Signed Event Webhook. Each POST is a JSON array of events,
 * signed with ECDSA (P-256, SHA-256) over `timestamp + raw body`; the signature (base64 DER) and
 * the timestamp ride in `X-Twilio-Email-Event-Webhook-Signature` / `-Timestamp`, and the
 * account's public key is the verification key the SendGrid app shows (base64 DER SPKI, given
 * with `--webhook-public-key`).
 */
import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { headerOf, staleness, type FeedbackItem, type FeedbackKind, type FeedbackVerdict, type FeedbackVerifier } from '../feedback.js';
import { MESSAGE_ID_ARG } from './adapter.js';

export const SIGNATURE_HEADER = 'x-twilio-email-event-webhook-signature';
export const TIMESTAMP_HEADER = 'x-twilio-email-event-webhook-timestamp';

/** The verification key as SendGrid shows it (base64 of the DER SPKI), or a PEM. */
export function sendgridPublicKey(text: string): KeyObject {
  const trimmed = text.trim();
  if (trimmed.includes('-----BEGIN')) return createPublicKey(trimmed);
  return createPublicKey({ key: Buffer.from(trimmed.replace(/\s+/g, ''), 'base64'), format: 'der', type: 'spki' });
}

/** True when `signature` (base64 DER ECDSA) signs `timestamp + body` under `publicKey`. */
export function sendgridSignatureValid(publicKey: string, timestamp: string, body: Buffer, signature: string): boolean {
  try {
    const payload = Buffer.concat([Buffer.from(timestamp, 'utf8'), body]);
    return verify('sha256', payload, { key: sendgridPublicKey(publicKey), dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
  } catch {
    return false;
  }
}

/**
 * `sg_message_id` is the `X-Message-Id` we stored followed by SendGrid's filter host and more
 * (`<X-Message-Id>.filterdrecv-…`, `….stfilter-015.…`, `….filter0001.…`): the part before the
 * filter segment, else before the first dot.
 */
export function sendgridMessageId(sgMessageId: string): string {
  const m = /^(.+?)\.(?:st)?filter[a-z0-9-]*\./i.exec(sgMessageId);
  return m ? m[1] : sgMessageId.split('.')[0];
}

/** Delivery events → our kinds; engagement events (open, click, unsubscribe, …) are not feedback. */
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

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined);

export const sendgridFeedback: FeedbackVerifier = {
  async verify(req, account, ctx): Promise<FeedbackVerdict> {
    const publicKey = account.settings.webhook_public_key;
    if (!publicKey) return { ok: false, code: 'feedback:unauthenticated', reason: 'the account has no webhook public key (attach with --webhook-public-key)' };
    const signature = headerOf(req.headers, SIGNATURE_HEADER);
    const timestamp = headerOf(req.headers, TIMESTAMP_HEADER);
    if (!signature || !timestamp) return { ok: false, code: 'feedback:unauthenticated', reason: 'missing X-Twilio-Email-Event-Webhook-Signature / -Timestamp' };
    if (!sendgridSignatureValid(publicKey, timestamp, req.rawBody, signature)) return { ok: false, code: 'feedback:unauthenticated', reason: 'ECDSA signature does not verify' };
    const stale = staleness(timestamp, ctx);
    if (stale) return { ok: false, code: 'feedback:stale', reason: stale };
    // SendGrid signs every delivery attempt afresh: the same signature twice is a replay.
    if (!(await ctx.rememberOnce(account, `sendgrid:${createHash('sha256').update(signature).digest('hex')}`))) {
      return { ok: false, code: 'feedback:replayed', reason: 'this signed notification was already received' };
    }

    let events: unknown;
    try {
      events = JSON.parse(req.rawBody.toString('utf8'));
    } catch {
      return { ok: false, code: 'feedback:malformed', reason: 'the body is not JSON' };
    }
    if (!Array.isArray(events) || events.some((e) => !e || typeof e !== 'object' || Array.isArray(e))) {
      return { ok: false, code: 'feedback:malformed', reason: 'the body is not a JSON array of events' };
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
        detail: { type: str(e.type) ?? String(e.event), subtype: str(e.bounce_classification), code: str(e.status), reply: str(e.reason) ?? str(e.response) },
      });
    }
    return { ok: true, items, ...(ignored ? { note: `${ignored} event(s) that are not delivery feedback ignored` } : {}) };
  },
};
