import {
  createHash,
  type KeyObject,
  timingSafeEqual,
  verify as verifySignature,
  X509Certificate,
} from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ProviderAccount } from '../../contract/providerAccount.js';
import type {
  FeedbackContext,
  FeedbackItem,
  FeedbackKind,
  FeedbackRequest,
  FeedbackVerdict,
  FeedbackVerifier,
} from '../feedback.js';

/**
 * provider-a (SES) event notifications via SNS (docs/delivery.md#provider-a-api-amazon-ses). SNS signatures prove
 * the message came from SNS, not from *your* topic: the account's `webhook_secret` in the URL keeps other topics out.
 */

const SNS_HOST = /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/;
const CERT_NAME = /^[A-Za-z0-9._-]+\.pem$/;
const FETCH_TIMEOUT_MS = 10_000;

export interface SnsMessage {
  Type: string;
  MessageId: string;
  TopicArn: string;
  Message: string;
  Timestamp: string;
  SignatureVersion: string;
  Signature: string;
  SigningCertURL: string;
  Subject?: string | null;
  SubscribeURL?: string;
  Token?: string;
  UnsubscribeURL?: string;
}

const NOTIFICATION_FIELDS = [
  'Message',
  'MessageId',
  'Subject',
  'Timestamp',
  'TopicArn',
  'Type',
] as const;
const CONFIRMATION_FIELDS = [
  'Message',
  'MessageId',
  'SubscribeURL',
  'Timestamp',
  'Token',
  'TopicArn',
  'Type',
] as const;

/** `name\nvalue\n` for each field of the message type, in byte order; `Subject` only when present. */
export function snsStringToSign(m: SnsMessage): string {
  const fields = m.Type === 'Notification' ? NOTIFICATION_FIELDS : CONFIRMATION_FIELDS;
  let out = '';
  for (const name of fields) {
    const value = (m as unknown as Record<string, unknown>)[name];
    if (value === undefined || value === null) continue;
    out += `${name}\n${String(value)}\n`;
  }
  return out;
}

/** Only on an SNS host, over HTTPS, for a `.pem` file. */
export function trustedCertUrl(value: string): URL | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (
    url.protocol !== 'https:' ||
    url.port !== '' ||
    url.username ||
    url.password ||
    !SNS_HOST.test(url.hostname)
  )
    return null;
  if (!CERT_NAME.test(path.posix.basename(url.pathname))) return null;
  return url;
}

class CertificateUnusable extends Error {}

const certificates = new Map<string, KeyObject>();
const MAX_CACHED = 64;

function remember(key: string, value: KeyObject): KeyObject {
  if (certificates.size >= MAX_CACHED) certificates.delete(certificates.keys().next().value!);
  certificates.set(key, value);
  return value;
}

async function signingKey(url: URL, dir: string | null, now: number): Promise<KeyObject> {
  const name = path.posix.basename(url.pathname);
  const key = dir ? path.resolve(dir, name) : url.toString();
  let pem: string;
  const cached = certificates.get(key);
  if (cached) return cached;
  if (dir) {
    try {
      pem = await readFile(key, 'utf8');
    } catch {
      throw new CertificateUnusable(`no certificate ${name} in feedback.sns_certificate_dir`);
    }
  } else {
    let res: Response;
    try {
      res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    } catch (err) {
      // Transient: a 5xx makes SNS deliver the notification again later.
      throw new Error(
        `could not fetch the SNS signing certificate ${url}: ${(err as Error).message}`,
      );
    }
    if (!res.ok)
      throw new CertificateUnusable(`the SNS signing certificate ${url} answered ${res.status}`);
    pem = await res.text();
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pem);
  } catch {
    throw new CertificateUnusable(`the SNS signing certificate ${name} is not a PEM certificate`);
  }
  if (Date.parse(cert.validFrom) > now || Date.parse(cert.validTo) < now)
    throw new CertificateUnusable(`the SNS signing certificate ${name} is not valid now`);
  return remember(key, cert.publicKey);
}

type JsonObject = Record<string, unknown>;
/** A JSON object's fields, or none when it is not one (SES records are read field by field). */
const fields = (v: unknown): JsonObject =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : {};
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const text = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== '' ? v : undefined;

function str(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0;
}

function sameSecret(a: string, b: string): boolean {
  const h = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(h(a), h(b));
}

function address(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const m = /<([^<>]+)>/.exec(value);
  const email = (m ? m[1] : value).trim();
  return email.includes('@') ? email : null;
}

/** From the original Message-ID (`<m.…@domain>`), which SES reports in `mail.headers`. */
function ourMessageId(mail: JsonObject): string | null {
  const candidates: unknown[] = [];
  for (const h of list(mail.headers).map(fields))
    if (str(h.name) && h.name.toLowerCase() === 'message-id') candidates.push(h.value);
  candidates.push(fields(mail.commonHeaders).messageId);
  for (const c of candidates) {
    const m = typeof c === 'string' ? /^\s*<?(m\.[0-9a-z]{26})@/.exec(c) : null;
    if (m) return m[1];
  }
  return null;
}

export function normalizeSesRecord(
  record: JsonObject,
  snsMessageId: string,
  snsTimestamp: number,
): { items: FeedbackItem[]; note?: string } | { malformed: string } {
  const type = text(record.eventType) ?? text(record.notificationType) ?? null;
  if (!type)
    return {
      items: [],
      note: 'SNS notification that is not an SES record (no eventType or notificationType); acknowledged',
    };
  const ignored = ['Send', 'Open', 'Click', 'Subscription', 'AmazonSnsSubscriptionSucceeded'];
  if (ignored.includes(type))
    return { items: [], note: `SES ${type} record acknowledged; not delivery feedback` };
  const handled = [
    'Bounce',
    'Complaint',
    'Delivery',
    'Reject',
    'Rendering Failure',
    'DeliveryDelay',
  ];
  if (!handled.includes(type))
    return { items: [], note: `SES ${type} record acknowledged; not delivery feedback` };
  const mail = fields(record.mail);
  const providerMessageId = text(mail.messageId);
  if (providerMessageId === undefined)
    return { malformed: `SES ${type} record without mail.messageId` };
  const messageId = ourMessageId(mail);
  const items: FeedbackItem[] = [];
  const at = (t: unknown) => {
    const ms = typeof t === 'string' ? Date.parse(t) : NaN;
    return Number.isNaN(ms) ? snsTimestamp : ms;
  };
  const push = (
    kind: FeedbackKind,
    rawRecipient: unknown,
    occurredAt: number,
    detail: Partial<Record<keyof FeedbackItem['detail'], unknown>>,
  ) => {
    const recipient = address(rawRecipient);
    if (!recipient) return;
    const clean: FeedbackItem['detail'] = {};
    for (const key of ['type', 'subtype', 'code', 'reply'] as const) {
      const value = text(detail[key]);
      if (value) clean[key] = value;
    }
    items.push({
      receiptKey: `sns:${snsMessageId}:${kind}:${recipient.toLowerCase()}`,
      kind,
      providerMessageId,
      messageId,
      recipient,
      occurredAt,
      detail: clean,
    });
  };
  switch (type) {
    case 'Bounce': {
      const b = fields(record.bounce);
      // Transient and Undetermined: SES may still deliver, or the cause is unknown.
      const kind: FeedbackKind = b.bounceType === 'Permanent' ? 'hard_bounce' : 'soft_bounce';
      for (const r of list(b.bouncedRecipients).map(fields))
        push(kind, r.emailAddress, at(b.timestamp), {
          type: b.bounceType,
          subtype: b.bounceSubType,
          code: r.status,
          reply: r.diagnosticCode,
        });
      break;
    }
    case 'Complaint': {
      const c = fields(record.complaint);
      if (c.complaintFeedbackType === 'not-spam')
        return {
          items: [],
          note: 'SES complaint record with feedback type not-spam; acknowledged, nothing suppressed',
        };
      for (const r of list(c.complainedRecipients).map(fields))
        push('complaint', r.emailAddress, at(c.timestamp), {
          type: c.complaintFeedbackType,
          subtype: c.complaintSubType,
        });
      break;
    }
    case 'Delivery': {
      const d = fields(record.delivery);
      for (const r of list(d.recipients))
        push('delivered', r, at(d.timestamp), { reply: d.smtpResponse });
      break;
    }
    case 'DeliveryDelay': {
      const d = fields(record.deliveryDelay);
      for (const r of list(d.delayedRecipients).map(fields))
        push('soft_bounce', r.emailAddress, at(d.timestamp), {
          type: d.delayType,
          code: r.status,
          reply: r.diagnosticCode,
        });
      break;
    }
    case 'Reject': {
      for (const r of list(mail.destination))
        push('failed', r, at(mail.timestamp), {
          type: 'Reject',
          reply: fields(record.reject).reason,
        });
      break;
    }
    case 'Rendering Failure': {
      for (const r of list(mail.destination))
        push('failed', r, at(mail.timestamp), {
          type: 'RenderingFailure',
          reply: fields(record.failure).errorMessage,
        });
      break;
    }
  }
  return items.length > 0
    ? { items }
    : { items, note: `SES ${type} record without recipients; acknowledged` };
}

async function confirmSubscription(
  m: SnsMessage,
  account: ProviderAccount,
  ctx: FeedbackContext,
): Promise<FeedbackVerdict> {
  let url: URL;
  try {
    url = new URL(m.SubscribeURL ?? '');
  } catch {
    return {
      ok: false,
      code: 'feedback:malformed',
      reason: 'SubscriptionConfirmation without a valid SubscribeURL',
    };
  }
  const { settings } = account;
  let endpointHost: string | null = null;
  try {
    endpointHost = settings.endpoint ? new URL(settings.endpoint).host : null;
  } catch {
    endpointHost = null;
  }
  const onSns =
    url.protocol === 'https:' && url.port === '' && !url.username && SNS_HOST.test(url.hostname);
  const onEndpoint =
    endpointHost !== null &&
    url.host === endpointHost &&
    (url.protocol === 'https:' || url.protocol === 'http:');
  if (!onSns && !onEndpoint)
    return {
      ok: false,
      code: 'feedback:unauthenticated',
      reason: `SubscribeURL host ${url.host} is not an SNS host`,
    };
  let res: Response;
  try {
    res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    await res.arrayBuffer();
  } catch (err) {
    throw new Error(
      `could not confirm the SNS subscription to ${m.TopicArn}: ${(err as Error).message}`,
    );
  }
  if (!res.ok)
    throw new Error(`confirming the SNS subscription to ${m.TopicArn} answered ${res.status}`);
  ctx.logger.info(
    { provider_account_id: account.id, topic_arn: m.TopicArn },
    'SNS subscription confirmed',
  );
  return { ok: true, items: [], note: `SNS subscription to ${m.TopicArn} confirmed` };
}

export const sesFeedback: FeedbackVerifier = {
  secretInUrl: true,
  async verify(
    req: FeedbackRequest,
    account: ProviderAccount,
    ctx: FeedbackContext,
  ): Promise<FeedbackVerdict> {
    const { secrets } = account;
    if (
      secrets.webhook_secret &&
      (req.token === null || !sameSecret(req.token, secrets.webhook_secret))
    ) {
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'the feedback URL lacks the account secret',
      };
    }
    let m: SnsMessage;
    try {
      m = JSON.parse(req.rawBody.toString('utf8')) as SnsMessage;
    } catch {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'the body is not an SNS message (JSON)',
      };
    }
    if (
      !m ||
      typeof m !== 'object' ||
      !str(m.Type) ||
      !str(m.MessageId) ||
      !str(m.TopicArn) ||
      typeof m.Message !== 'string' ||
      !str(m.Timestamp)
    ) {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: 'the body is not an SNS message (Type, MessageId, TopicArn, Message, Timestamp)',
      };
    }
    if (!['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation'].includes(m.Type)) {
      return {
        ok: false,
        code: 'feedback:malformed',
        reason: `unknown SNS message type ${m.Type}`,
      };
    }
    if (
      !str(m.Signature) ||
      !str(m.SigningCertURL) ||
      (m.SignatureVersion !== '1' && m.SignatureVersion !== '2')
    ) {
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'SNS message without a SignatureVersion 1 or 2 signature',
      };
    }
    // SNS's own headers must agree with the signed body.
    const topicHeader = req.headers['x-amz-sns-topic-arn'];
    const typeHeader = req.headers['x-amz-sns-message-type'];
    if (
      (typeof topicHeader === 'string' && topicHeader !== m.TopicArn) ||
      (typeof typeHeader === 'string' && typeHeader !== m.Type)
    ) {
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'x-amz-sns-topic-arn / x-amz-sns-message-type do not match the message',
      };
    }
    const certUrl = trustedCertUrl(m.SigningCertURL);
    if (!certUrl)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'SigningCertURL is not an https://sns.<region>.amazonaws.com/….pem URL',
      };
    let key: KeyObject;
    try {
      key = await signingKey(certUrl, ctx.config.sns_certificate_dir ?? null, ctx.clock.now());
    } catch (err) {
      if (err instanceof CertificateUnusable)
        return { ok: false, code: 'feedback:unauthenticated', reason: err.message };
      throw err;
    }
    const signed = verifySignature(
      m.SignatureVersion === '1' ? 'sha1' : 'sha256',
      Buffer.from(snsStringToSign(m), 'utf8'),
      key,
      Buffer.from(m.Signature, 'base64'),
    );
    if (!signed)
      return {
        ok: false,
        code: 'feedback:unauthenticated',
        reason: 'the SNS signature does not verify',
      };
    const sentAt = Date.parse(m.Timestamp);
    if (Number.isNaN(sentAt))
      return { ok: false, code: 'feedback:malformed', reason: 'SNS Timestamp is not a date' };
    if (Math.abs(ctx.clock.now() - sentAt) > ctx.config.tolerance_seconds * 1000) {
      return {
        ok: false,
        code: 'feedback:stale',
        reason: `SNS Timestamp ${m.Timestamp} is outside the ${ctx.config.tolerance_seconds} s window`,
      };
    }

    // Confirming is idempotent at SNS, and a failed GET must leave SNS free to deliver it again: no replay bookkeeping.
    if (m.Type === 'SubscriptionConfirmation') return confirmSubscription(m, account, ctx);
    if (!(await ctx.rememberOnce(account, `sns:${m.MessageId}`)))
      return {
        ok: false,
        code: 'feedback:replayed',
        reason: `SNS message ${m.MessageId} was already received`,
      };
    if (m.Type === 'UnsubscribeConfirmation') {
      ctx.logger.warn(
        { provider_account_id: account.id, topic_arn: m.TopicArn },
        'SNS subscription deleted: no more SES feedback from this topic until it is subscribed again',
      );
      return { ok: true, items: [], note: `SNS subscription to ${m.TopicArn} was deleted` };
    }
    let record: unknown;
    try {
      record = JSON.parse(m.Message);
    } catch {
      return {
        ok: true,
        items: [],
        note: 'SNS notification whose Message is not JSON (not from SES); acknowledged',
      };
    }
    if (!record || typeof record !== 'object' || Array.isArray(record))
      return {
        ok: true,
        items: [],
        note: 'SNS notification that is not an SES record; acknowledged',
      };
    const result = normalizeSesRecord(fields(record), m.MessageId, sentAt);
    if ('malformed' in result)
      return { ok: false, code: 'feedback:malformed', reason: result.malformed };
    return { ok: true, items: result.items, ...(result.note ? { note: result.note } : {}) };
  },
};
