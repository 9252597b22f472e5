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

/** Postmark webhooks carry no signature: the URL carries the account's webhook secret (basic auth or the token segment). */

/** Postmark's bounce types by what they say about the address (docs/delivery.md#provider-e-api-postmark). */
const BOUNCE_KINDS: Record<string, FeedbackKind> = {
  HardBounce: 'hard_bounce',
  BadEmailAddress: 'hard_bounce',
  Transient: 'soft_bounce',
  DnsError: 'soft_bounce',
  SoftBounce: 'soft_bounce',
  SpamNotification: 'soft_bounce',
  Unknown: 'soft_bounce',
  SpamComplaint: 'complaint',
  Blocked: 'failed',
  DMARCPolicy: 'failed',
  SMTPApiError: 'failed',
  TemplateRenderingFailed: 'failed',
  ManuallyDeactivated: 'failed',
  Unconfirmed: 'failed',
};

interface PostmarkRecord {
  RecordType?: unknown;
  ID?: unknown;
  Type?: unknown;
  TypeCode?: unknown;
  MessageID?: unknown;
  Recipient?: unknown;
  Email?: unknown;
  DeliveredAt?: unknown;
  BouncedAt?: unknown;
  Details?: unknown;
  Description?: unknown;
  Metadata?: unknown;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

/** 64-bit integers, beyond what a JSON number keeps exactly: the digits are read from the raw body. */
function rawId(raw: string, parsed: unknown): string | null {
  const m = /"ID"\s*:\s*"?(\d+)"?/.exec(raw);
  if (m) return m[1];
  return typeof parsed === 'number' || typeof parsed === 'string' ? String(parsed) : null;
}

function time(value: unknown, fallback: number): number {
  const t = typeof value === 'string' ? Date.parse(value) : NaN;
  return Number.isNaN(t) ? fallback : t;
}

export const postmarkFeedback: FeedbackVerifier = {
  secretInUrl: true,
  async verify(
    req: FeedbackRequest,
    account: ProviderAccount,
    ctx: FeedbackContext,
  ): Promise<FeedbackVerdict> {
    const refused = checkUrlSecret(req, account, ['token', 'basic']);
    if (refused) return refused;
    const raw = req.rawBody.toString('utf8');
    let record: PostmarkRecord;
    try {
      record = JSON.parse(raw);
    } catch {
      return { ok: false, code: 'feedback:malformed', reason: 'the body is not JSON' };
    }
    if (
      !record ||
      typeof record !== 'object' ||
      Array.isArray(record) ||
      typeof record.RecordType !== 'string'
    ) {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'not a Postmark webhook record (no RecordType)',
      };
    }
    const metadata =
      record.Metadata && typeof record.Metadata === 'object'
        ? (record.Metadata as Record<string, unknown>)
        : {};
    const messageId = str(metadata.postern_message_id);
    const providerMessageId = str(record.MessageID);
    const now = ctx.clock.now();

    let kind: FeedbackKind | undefined;
    let recipient: string | null;
    let occurredAt: number;
    let receiptKey: string;
    switch (record.RecordType) {
      case 'Delivery':
        kind = 'delivered';
        recipient = str(record.Recipient);
        occurredAt = time(record.DeliveredAt, now);
        // Delivery records have no ID: one delivery per message and recipient.
        receiptKey = `Delivery:${providerMessageId}:${recipient?.toLowerCase()}`;
        break;
      case 'Bounce':
      case 'SpamComplaint': {
        const type = str(record.Type) ?? record.RecordType;
        kind = record.RecordType === 'SpamComplaint' ? 'complaint' : BOUNCE_KINDS[type];
        if (!kind)
          return {
            ok: true,
            items: [],
            note: `postmark bounce type "${type}" is not a delivery outcome`,
          };
        recipient = str(record.Email);
        occurredAt = time(record.BouncedAt, now);
        const id = rawId(raw, record.ID);
        receiptKey = id
          ? `${record.RecordType}:${id}`
          : `${record.RecordType}:${type}:${providerMessageId}:${recipient?.toLowerCase()}:${record.BouncedAt}`;
        break;
      }
      default:
        // SubscriptionChange's suppressions follow a Bounce or SpamComplaint we also receive.
        return {
          ok: true,
          items: [],
          note: `postmark "${record.RecordType}" records are not delivery feedback`,
        };
    }
    if (!recipient)
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: `a ${record.RecordType} record without a recipient`,
      };
    const reply = str(record.Details) ?? str(record.Description);
    const item: FeedbackItem = {
      receiptKey,
      kind,
      providerMessageId,
      messageId,
      recipient,
      occurredAt,
      detail: {
        type: str(record.Type) ?? record.RecordType,
        ...(typeof record.TypeCode === 'number' ? { code: String(record.TypeCode) } : {}),
        ...(reply ? { reply } : {}),
      },
    };
    return { ok: true, items: [item] };
  },
};
