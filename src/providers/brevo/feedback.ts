import type { ProviderAccount } from '../../contract/providerAccount.js';
import type {
  FeedbackContext,
  FeedbackItem,
  FeedbackKind,
  FeedbackRequest,
  FeedbackVerdict,
  FeedbackVerifier,
} from '../feedback.js';
import { checkUrlSecret } from '../urlSecret.js';
import { BREVO_CUSTOM_HEADER, brevoMessageId, POSTERN_ID_FIELD } from './adapter.js';

/** Brevo webhooks carry no signature: the account's webhook secret rides in the URL or as a bearer token (docs/delivery.md#provider-f-api-brevo). */
const KINDS: Record<string, FeedbackKind> = {
  delivered: 'delivered',
  hard_bounce: 'hard_bounce',
  soft_bounce: 'soft_bounce',
  deferred: 'soft_bounce',
  spam: 'complaint',
  blocked: 'failed',
  invalid_email: 'failed',
  error: 'failed',
};

interface BrevoEvent {
  event?: unknown;
  email?: unknown;
  id?: unknown;
  'message-id'?: unknown;
  ts_event?: unknown;
  ts_epoch?: unknown;
  ts?: unknown;
  reason?: unknown;
  [header: string]: unknown;
}

const str = (v: unknown): string | null =>
  typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : null;

/** From the `X-Mailin-custom` header Brevo echoes. */
function posternId(event: BrevoEvent): string | null {
  const custom = Object.entries(event).find(
    ([k]) => k.toLowerCase() === BREVO_CUSTOM_HEADER.toLowerCase(),
  )?.[1];
  if (typeof custom !== 'string') return null;
  try {
    const parsed = JSON.parse(custom) as Record<string, unknown>;
    return str(parsed?.[POSTERN_ID_FIELD]);
  } catch {
    return null;
  }
}

function occurredAt(event: BrevoEvent, fallback: number): number {
  // ts_event and ts are UTC seconds, ts_epoch milliseconds (`date` is in the account's timezone).
  for (const [value, scale] of [
    [event.ts_event, 1000],
    [event.ts, 1000],
    [event.ts_epoch, 1],
  ] as const) {
    const n =
      typeof value === 'number'
        ? value
        : typeof value === 'string' && value.trim() !== ''
          ? Number(value)
          : NaN;
    if (Number.isFinite(n)) return n * scale;
  }
  return fallback;
}

export const brevoFeedback: FeedbackVerifier = {
  secretInUrl: true,
  async verify(
    req: FeedbackRequest,
    account: ProviderAccount,
    ctx: FeedbackContext,
  ): Promise<FeedbackVerdict> {
    const refused = checkUrlSecret(req, account, ['token', 'basic', 'bearer']);
    if (refused) return refused;
    let parsed: unknown;
    try {
      parsed = JSON.parse(req.rawBody.toString('utf8'));
    } catch {
      return { ok: false, code: 'feedback:malformed', reason: 'the body is not JSON' };
    }
    const events = Array.isArray(parsed) ? parsed : [parsed];
    if (
      events.length === 0 ||
      events.some((e) => !e || typeof e !== 'object' || typeof (e as BrevoEvent).event !== 'string')
    ) {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'not a Brevo webhook event (no event)',
      };
    }
    const items: FeedbackItem[] = [];
    const ignored: string[] = [];
    for (const event of events as BrevoEvent[]) {
      const name = event.event as string;
      const kind = KINDS[name];
      if (!kind) {
        ignored.push(name);
        continue;
      }
      const recipient = str(event.email);
      if (!recipient)
        return {
          ok: false,
          code: 'feedback:malformed',
          reason: `a "${name}" event without an email`,
        };
      const rawMessageId = str(event['message-id']);
      const reply = str(event.reason);
      items.push({
        // `id` is the webhook's id, not the event's: the event is the rest of the key.
        receiptKey: `${str(event.id)}:${name}:${rawMessageId}:${recipient.toLowerCase()}:${str(event.ts_event) ?? str(event.ts_epoch) ?? str(event.ts)}`,
        kind,
        providerMessageId: rawMessageId ? brevoMessageId(rawMessageId) : null,
        messageId: posternId(event),
        recipient,
        occurredAt: occurredAt(event, ctx.clock.now()),
        detail: { type: name, ...(reply ? { reply } : {}) },
      });
    }
    const note =
      ignored.length > 0
        ? `brevo ${[...new Set(ignored)].map((e) => `"${e}"`).join(', ')} events are not delivery feedback`
        : undefined;
    return { ok: true, items, ...(note ? { note } : {}) };
  },
};
