import aws4 from 'aws4';
import type { ProviderAccount } from '../../contract/providerAccount.js';
import {
  type AdapterDeps,
  type DeliveryJob,
  type ProviderAdapter,
  type SendResult,
  storedMimeBytes,
} from '../adapter.js';
import {
  type ApiResponse,
  baseUrl,
  callProviderApi,
  isResponse,
  retryAfterMs,
} from '../httpApi.js';

/** provider-a-api: SES v2 `SendEmail` with `Content.Raw`, SigV4-signed (docs/delivery.md#provider-a-api-amazon-ses). */

export const SES_DEFAULT_REGION = 'us-east-1';
export const SES_SEND_PATH = '/v2/email/outbound-emails';

const TAG_PART = /^[A-Za-z0-9_-]{1,256}$/;
const MAX_TAGS = 50;

/** Without a `Retry-After`, a `TooManyRequestsException` (the per-second send rate) is retried after a second. */
const RATE_THROTTLE_MS = 1000;
/** A `LimitExceededException` (the sending quota): SES's guide says to wait "up to 10 minutes"; the account rests that long. */
const QUOTA_THROTTLE_MS = 10 * 60 * 1000;

export interface SesTag {
  Name: string;
  Value: string;
}

export interface SesSendEmailRequest {
  FromEmailAddress?: string;
  Destination: { ToAddresses: string[]; CcAddresses: string[]; BccAddresses: string[] };
  Content: { Raw: { Data: string } };
  EmailTags?: SesTag[];
  ConfigurationSetName?: string;
}

/** The message's tags as SES `EmailTags`; pairs SES would refuse are left out rather than failing the message. First name wins. */
export function sesTags(job: Pick<DeliveryJob, 'tags' | 'metadata' | 'category'>): SesTag[] {
  const out: SesTag[] = [];
  const seen = new Set<string>();
  const add = (Name: string, Value: string) => {
    if (out.length >= MAX_TAGS || seen.has(Name) || !TAG_PART.test(Name) || !TAG_PART.test(Value))
      return;
    seen.add(Name);
    out.push({ Name, Value });
  };
  for (const tag of job.tags) add(tag, 'true');
  if (job.category) add('category', job.category);
  for (const [key, value] of Object.entries(job.metadata)) add(key, value);
  return out;
}

/** To and Cc as addressed, everyone else in the envelope as Bcc: SES sends to exactly these, not to the header lists. */
export function sesDestination(
  job: Pick<DeliveryJob, 'envelope' | 'recipients'>,
): SesSendEmailRequest['Destination'] {
  const owed = new Map(job.envelope.to.map((e) => [e.toLowerCase(), e]));
  const take = (list: string[]) => {
    const out: string[] = [];
    for (const e of list) {
      const key = e.toLowerCase();
      if (owed.has(key)) {
        out.push(owed.get(key)!);
        owed.delete(key);
      }
    }
    return out;
  };
  const ToAddresses = take(job.recipients.to);
  const CcAddresses = take(job.recipients.cc);
  return { ToAddresses, CcAddresses, BccAddresses: [...owed.values()] };
}

export async function sesRequestBody(job: DeliveryJob): Promise<SesSendEmailRequest> {
  const raw = await storedMimeBytes(job, job.prependHeaders);
  const body: SesSendEmailRequest = {
    ...(job.envelope.from ? { FromEmailAddress: job.envelope.from } : {}),
    Destination: sesDestination(job),
    Content: { Raw: { Data: raw.toString('base64') } },
  };
  const tags = sesTags(job);
  if (tags.length > 0) body.EmailTags = tags;
  const configurationSet = job.providerOptions?.['provider-a-api']?.configuration_set;
  if (configurationSet) body.ConfigurationSetName = configurationSet;
  return body;
}

/** From `x-amzn-ErrorType` (`Code:namespace`), else the body's `__type` (`namespace#Code`) or `code`. */
export function awsErrorCode(res: ApiResponse): { code: string | null; message: string | null } {
  let body: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(res.text) as unknown;
    if (parsed && typeof parsed === 'object') body = parsed as Record<string, unknown>;
  } catch {
    // Not JSON (a proxy's HTML page): the status alone decides.
  }
  const header = res.headers.get('x-amzn-errortype');
  const raw =
    header ??
    (typeof body.__type === 'string'
      ? body.__type
      : typeof body.code === 'string'
        ? body.code
        : typeof body.Code === 'string'
          ? body.Code
          : null);
  const code = raw ? (raw.split(':')[0].split('#').pop() ?? '').trim() || null : null;
  const message =
    typeof body.message === 'string'
      ? body.message
      : typeof body.Message === 'string'
        ? body.Message
        : null;
  return { code, message };
}

const ACCOUNT_CODES = new Set([
  'AccountSuspendedException',
  'SendingPausedException',
  'MailFromDomainNotVerifiedException',
  'NotFoundException',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'SignatureDoesNotMatch',
  'IncompleteSignatureException',
  'InvalidClientTokenId',
  'MissingAuthenticationTokenException',
  'MissingAuthenticationToken',
  'AccessDeniedException',
  'ExpiredTokenException',
  'NotAuthorizedException',
]);

const THROTTLE_CODES = new Set([
  'TooManyRequestsException',
  'ThrottlingException',
  'Throttling',
  'LimitExceededException',
]);
const SERVER_CODES = new Set([
  'InternalFailure',
  'InternalServiceErrorException',
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'RequestTimeout',
]);

/** SES's answer, read by its error code (docs/delivery.md#provider-a-api-amazon-ses, "Errors"). */
export function classifySesError(
  res: ApiResponse,
  now: number,
): Exclude<SendResult, { kind: 'sent' }> {
  const { code, message } = awsErrorCode(res);
  const reply = `${res.status} ${code ?? 'error'}${message ? `: ${message.replace(/\s+/g, ' ').trim().slice(0, 400)}` : ''}`;
  if (code && THROTTLE_CODES.has(code)) {
    const quota = code === 'LimitExceededException' || /quota/i.test(message ?? '');
    return {
      kind: 'temporary',
      reply,
      retryAfterMs:
        retryAfterMs(res.headers, now) ?? (quota ? QUOTA_THROTTLE_MS : RATE_THROTTLE_MS),
    };
  }
  if (res.status === 429)
    return {
      kind: 'temporary',
      reply,
      retryAfterMs: retryAfterMs(res.headers, now) ?? RATE_THROTTLE_MS,
    };
  if (res.status >= 500 || (code && SERVER_CODES.has(code)))
    return { kind: 'temporary', reply, retryAfterMs: retryAfterMs(res.headers, now) };
  if (code && ACCOUNT_CODES.has(code)) return { kind: 'account', reply };
  if (code === 'MessageRejected' && /not verified|not authorized|sandbox/i.test(message ?? ''))
    return { kind: 'account', reply };
  if (res.status === 401 || res.status === 403) return { kind: 'account', reply };
  if (res.status >= 300 && res.status < 400)
    return { kind: 'account', reply: `${reply} (redirect not followed; check the endpoint)` };
  return { kind: 'permanent', reply };
}

export function amzDate(ms: number): string {
  return new Date(ms).toISOString().replace(/[:-]|\.\d{3}/g, '');
}

export class SesApiAdapter implements ProviderAdapter {
  constructor(private readonly deps: AdapterDeps) {}

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const { settings, secrets } = account;
    if (!settings.user || !secrets.api_key) {
      return {
        kind: 'account',
        reply:
          'provider-a-api needs the access key id (--user) and the secret access key (--api-key)',
      };
    }
    const region = settings.region ?? SES_DEFAULT_REGION;
    const url = new URL(
      `${baseUrl(settings.endpoint, `https://email.${region}.amazonaws.com`)}${SES_SEND_PATH}`,
    );
    const body = JSON.stringify(await sesRequestBody(job));
    const signed = aws4.sign(
      {
        host: url.host,
        method: 'POST',
        path: url.pathname + url.search,
        service: 'ses',
        region,
        body,
        headers: {
          'Content-Type': 'application/json',
          'X-Amz-Date': amzDate(this.deps.clock.now()),
        },
      },
      { accessKeyId: settings.user, secretAccessKey: secrets.api_key },
    );
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(signed.headers ?? {})) {
      if (name.toLowerCase() !== 'host' && value !== undefined) headers[name] = String(value);
    }
    const res = await callProviderApi({
      method: 'POST',
      url: url.toString(),
      headers,
      body,
      timeoutMs: this.deps.timeoutMs,
    });
    if (!isResponse(res)) return res;
    if (res.status >= 200 && res.status < 300) {
      let messageId: unknown;
      try {
        messageId = (JSON.parse(res.text) as { MessageId?: unknown }).MessageId;
      } catch {
        messageId = undefined;
      }
      if (typeof messageId !== 'string' || !messageId) {
        // Accepted, but its feedback cannot be matched: still sent (a retry would send it twice).
        return {
          kind: 'sent',
          providerMessageId: null,
          reply: `200 without a MessageId: ${res.text.slice(0, 200)}`,
          bounced: [],
          deferred: [],
        };
      }
      return {
        kind: 'sent',
        providerMessageId: messageId,
        reply: `200 MessageId ${messageId}`,
        bounced: [],
        deferred: [],
      };
    }
    return classifySesError(res, this.deps.clock.now());
  }

  async close(): Promise<void> {}
}
