import { createHmac } from 'node:crypto';
import type { ProviderAccount } from '../../contract/providerAccount.js';
import {
  type FeedbackContext,
  type FeedbackItem,
  type FeedbackKind,
  type FeedbackRequest,
  type FeedbackVerdict,
  type FeedbackVerifier,
  staleness,
} from '../feedback.js';
import { secretsEqual, webhookSecretOf } from '../urlSecret.js';

/** Mailgun webhooks: HMAC-SHA256 over `timestamp + token` (a subaccount's `parent-signature` too); a seen token is a 406 replay. */

interface MailgunEventData {
  id?: unknown;
  event?: unknown;
  timestamp?: unknown;
  recipient?: unknown;
  severity?: unknown;
  reason?: unknown;
  'user-variables'?: unknown;
  message?: { headers?: Record<string, unknown> };
  'delivery-status'?: { code?: unknown; message?: unknown; description?: unknown };
  reject?: { reason?: unknown; description?: unknown };
}

const str = (v: unknown): string | null =>
  typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : null;

/** The recipient's server refused the address; any other permanent failure is Mailgun giving up, not evidence against the address. */
const HARD_BOUNCE_REASONS = new Set(['bounce', 'suppress-bounce']);

function kindOf(data: MailgunEventData): FeedbackKind | null {
  switch (data.event) {
    case 'delivered':
      return 'delivered';
    case 'failed':
      if (data.severity === 'temporary') return 'soft_bounce';
      return HARD_BOUNCE_REASONS.has(String(data.reason)) ? 'hard_bounce' : 'failed';
    case 'complained':
      return 'complaint';
    case 'rejected':
      return 'failed';
    default:
      return null;
  }
}

function firstAddress(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const angled = /<([^<>\s]+@[^<>\s]+)>/.exec(value);
  if (angled) return angled[1];
  const bare = /[^\s,;"<>]+@[^\s,;"<>]+/.exec(value);
  return bare ? bare[0] : null;
}

export const mailgunFeedback: FeedbackVerifier = {
  async verify(
    req: FeedbackRequest,
    account: ProviderAccount,
    ctx: FeedbackContext,
  ): Promise<FeedbackVerdict> {
    let body: { signature?: Record<string, unknown>; 'event-data'?: MailgunEventData };
    try {
      body = JSON.parse(req.rawBody.toString('utf8'));
    } catch {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'the body is not JSON (configure Mailgun webhooks, which post JSON)',
      };
    }
    if (
      !body ||
      typeof body !== 'object' ||
      !body.signature ||
      typeof body.signature !== 'object'
    ) {
      return { ok: false, code: 'feedback:malformed', reason: 'no signature block' };
    }
    const timestamp = str(body.signature.timestamp);
    const token = str(body.signature.token);
    const signature = str(body.signature.signature);
    if (!timestamp || !token || !signature || !/^\d+$/.test(timestamp))
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'the signature block lacks timestamp, token or signature',
      };

    const key = webhookSecretOf(account);
    if (!key)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'the account has no webhook_secret (the HTTP webhook signing key)',
      };
    const expected = createHmac('sha256', key)
      .update(timestamp + token)
      .digest('hex');
    const parent = str(body.signature['parent-signature']);
    const matches =
      secretsEqual(signature.toLowerCase(), expected) ||
      (parent !== null && secretsEqual(parent.toLowerCase(), expected));
    if (!matches)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'the signature does not match the webhook signing key',
      };

    const stale = staleness(timestamp, ctx);
    if (stale) return { ok: false, code: 'feedback:stale', reason: stale };
    if (!(await ctx.rememberOnce(account, `mailgun-token:${token}`)))
      return {
        ok: false,
        code: 'feedback:replayed',
        reason: 'this signature token was already used',
      };

    const data = body['event-data'];
    if (!data || typeof data !== 'object' || typeof data.event !== 'string')
      return { ok: false, code: 'feedback:malformed', reason: 'no event-data with an event' };
    const kind = kindOf(data);
    if (!kind)
      return {
        ok: true,
        items: [],
        note: `mailgun "${data.event}" events are not delivery feedback`,
      };

    const headers = data.message?.headers ?? {};
    const recipient = str(data.recipient) ?? firstAddress(headers.to);
    if (!recipient)
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: `a "${data.event}" event without a recipient`,
      };
    const messageIdHeader = str(headers['message-id']);
    const variables =
      data['user-variables'] && typeof data['user-variables'] === 'object'
        ? (data['user-variables'] as Record<string, unknown>)
        : {};
    const seconds = typeof data.timestamp === 'number' ? data.timestamp : Number(data.timestamp);
    const occurredAt = Number.isFinite(seconds)
      ? Math.round(seconds * 1000)
      : Number(timestamp) * 1000;
    const status = data['delivery-status'] ?? {};
    const reply =
      str(status.message) ?? str(status.description) ?? str(data.reject?.reason) ?? undefined;
    // The user variable of an API send, else our Message-ID, which Mailgun keeps for SMTP (provider-c-smtp) sends too.
    const ours =
      str(variables.postern_message_id) ??
      /^<?(m\.[0-9a-z]{10,})@/i.exec(messageIdHeader ?? '')?.[1] ??
      null;
    const item: FeedbackItem = {
      // Event ids are unique per day at Mailgun: with the event's own timestamp they are unique.
      receiptKey: str(data.id)
        ? `${str(data.id)}@${data.timestamp}`
        : `${data.event}:${messageIdHeader}:${recipient}:${data.timestamp}`,
      kind,
      providerMessageId: messageIdHeader ? messageIdHeader.replace(/^<|>$/g, '') : null,
      messageId: ours,
      recipient,
      occurredAt,
      detail: {
        type: data.event,
        ...(str(data.reason) ? { subtype: str(data.reason)! } : {}),
        ...(str(status.code) ? { code: str(status.code)! } : {}),
        ...(reply ? { reply } : {}),
      },
    };
    return { ok: true, items: [item] };
  },
};
