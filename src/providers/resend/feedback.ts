/**
 * provider-d feedback: Resend webhooks, signed the Standard Webhooks (Svix) way. The signed
 * content is `${svix-id}.${svix-timestamp}.${raw body}`, HMAC-SHA256 under the endpoint's
 * signing secret (`whsec_` + base64 key, given with `--webhook-secret`); `svix-signature` holds
 * space-separated `v1,<base64>` entries, any one of which may match. One event per POST:
 * `{"type","created_at","data":{"email_id","to":[…],…}}`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  type FeedbackItem,
  type FeedbackKind,
  type FeedbackVerdict,
  type FeedbackVerifier,
  headerOf,
  staleness,
} from '../feedback.js';
import { decodeMessageIdTag, MESSAGE_ID_TAG } from './adapter.js';

/** The HMAC key of a signing secret: the base64 after `whsec_`. */
export function svixKey(secret: string): Buffer {
  return Buffer.from(
    secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret,
    'base64',
  );
}

/** `v1,<base64>` for the content, as Svix computes it. */
export function svixSignature(secret: string, id: string, timestamp: string, body: Buffer): string {
  const mac = createHmac('sha256', svixKey(secret))
    .update(`${id}.${timestamp}.`)
    .update(body)
    .digest('base64');
  return `v1,${mac}`;
}

function signatureMatches(header: string, expected: string): boolean {
  const want = Buffer.from(expected);
  return header.split(' ').some((entry) => {
    const got = Buffer.from(entry.trim());
    return got.length === want.length && timingSafeEqual(got, want);
  });
}

type Data = Record<string, unknown>;

/** Resend's email events → our kinds; `email.sent`, opens, clicks and non-email events are not feedback. */
function kindOf(type: unknown, data: Data): FeedbackKind | null {
  switch (type) {
    case 'email.delivered':
      return 'delivered';
    case 'email.bounced': {
      // Permanent (or no type: Resend reports a bounce as a permanent refusal) is hard; Transient / Undetermined is not.
      const t = (data.bounce as Data | undefined)?.type;
      return typeof t === 'string' && t !== 'Permanent' ? 'soft_bounce' : 'hard_bounce';
    }
    case 'email.delivery_delayed':
      return 'soft_bounce';
    case 'email.complained':
      return 'complaint';
    case 'email.failed':
    case 'email.suppressed':
      return 'failed';
    default:
      return null;
  }
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function detailOf(type: string, data: Data): FeedbackItem['detail'] {
  const bounce = data.bounce as Data | undefined;
  const failed = data.failed as Data | undefined;
  const suppressed = data.suppressed as Data | undefined;
  if (bounce) {
    const diagnostic = Array.isArray(bounce.diagnosticCode)
      ? str(bounce.diagnosticCode[0])
      : str(bounce.diagnosticCode);
    return {
      type: str(bounce.type),
      subtype: str(bounce.subType),
      reply: diagnostic ?? str(bounce.message),
    };
  }
  if (failed) return { type: 'failed', reply: str(failed.reason) };
  if (suppressed)
    return { type: str(suppressed.type) ?? 'suppressed', reply: str(suppressed.message) };
  return { type: type.replace(/^email\./, '') };
}

/** Tags come as an object (`{"name":"value"}`), or as the `[{name,value}]` they were sent as. */
function tagValue(tags: unknown, name: string): unknown {
  if (Array.isArray(tags))
    return (tags.find((t) => t && (t as Data).name === name) as Data | undefined)?.value;
  return tags && typeof tags === 'object' ? (tags as Data)[name] : undefined;
}

export const resendFeedback: FeedbackVerifier = {
  async verify(req, account, ctx): Promise<FeedbackVerdict> {
    const secret = account.secrets.webhook_secret;
    if (!secret)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'the account has no webhook signing secret (attach with --webhook-secret)',
      };
    // Standard Webhooks names (`webhook-*`) are the same scheme under other headers.
    const id = headerOf(req.headers, 'svix-id') ?? headerOf(req.headers, 'webhook-id');
    const timestamp =
      headerOf(req.headers, 'svix-timestamp') ?? headerOf(req.headers, 'webhook-timestamp');
    const signature =
      headerOf(req.headers, 'svix-signature') ?? headerOf(req.headers, 'webhook-signature');
    if (!id || !timestamp || !signature)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'missing svix-id / svix-timestamp / svix-signature',
      };
    if (!signatureMatches(signature, svixSignature(secret, id, timestamp, req.rawBody))) {
      return { ok: false, code: 'feedback:unauthenticated', reason: 'no v1 signature matches' };
    }
    const stale = staleness(timestamp, ctx);
    if (stale) return { ok: false, code: 'feedback:stale', reason: stale };
    // A retry of the same event keeps its svix-id but is signed at a new timestamp: only the
    // exact same signed request again is a replay (its items dedupe by svix-id anyway).
    if (!(await ctx.rememberOnce(account, `resend:${id}:${timestamp}`)))
      return {
        ok: false,
        code: 'feedback:replayed',
        reason: 'this signed notification was already received',
      };

    let event: Data;
    try {
      event = JSON.parse(req.rawBody.toString('utf8')) as Data;
    } catch {
      return { ok: false, code: 'feedback:malformed', reason: 'the body is not JSON' };
    }
    if (
      !event ||
      typeof event !== 'object' ||
      Array.isArray(event) ||
      typeof event.type !== 'string'
    ) {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'the body is not a Resend webhook event',
      };
    }
    const data = (event.data && typeof event.data === 'object' ? event.data : {}) as Data;
    const kind = kindOf(event.type, data);
    if (!kind)
      return { ok: true, items: [], note: `${event.type} is not delivery feedback; ignored` };
    const recipients = (Array.isArray(data.to) ? data.to : [data.to])
      .filter((r): r is string => typeof r === 'string' && r !== '')
      .map((r) => /<([^<>]+)>\s*$/.exec(r)?.[1] ?? r.trim());
    if (recipients.length === 0)
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: `${event.type} names no recipient (data.to)`,
      };
    const occurred = Date.parse(str(event.created_at) ?? '');
    const detail = detailOf(event.type, data);
    const items: FeedbackItem[] = recipients.map((recipient) => ({
      receiptKey: `resend:${id}:${recipient.toLowerCase()}`,
      kind,
      providerMessageId: str(data.email_id) ?? null,
      messageId: decodeMessageIdTag(tagValue(data.tags, MESSAGE_ID_TAG)),
      recipient,
      occurredAt: Number.isNaN(occurred) ? ctx.clock.now() : occurred,
      detail,
    }));
    return { ok: true, items };
  },
};
