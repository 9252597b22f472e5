/**
 * Amazon SES API v2 emulator (provider-a-api) and an Amazon SNS signer for SES feedback.
 * Test fixture only; never imported from src/.
 *
 * The emulator answers `POST /v2/email/outbound-emails` the way SES does: it checks the AWS
 * Signature Version 4 itself (recomputed here, independently of the adapter's signing library,
 * with the account's secret), then the SendEmail body (Content.Raw, Destination, EmailTags,
 * ConfigurationSetName), and answers SES's success body `{"MessageId": …}` or its errors: the
 * error code in `x-amzn-ErrorType`, the text in the JSON body's `message`. It also serves the
 * SNS `SubscribeURL` (`GET /?Action=ConfirmSubscription…`) so subscription confirmation can be
 * exercised against the account's own endpoint host.
 */
import { createHash, createHmac, createSign, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';
import {
  type EmulatorMode,
  type EmulatorReply,
  ProviderEmulator,
  type RecordedRequest,
} from '../providerEmulator.js';

/* ------------------------------------------------------------------------------------------ */
/* SigV4, written from AWS's description (canonical request → string to sign → HMAC chain)     */
/* ------------------------------------------------------------------------------------------ */

const sha256Hex = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) =>
  createHmac('sha256', key).update(data, 'utf8').digest();

/** RFC 3986 encoding as SigV4 wants it (everything but unreserved characters). */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

export interface SigV4Input {
  method: string;
  /** Path as sent (already percent-encoded). */
  path: string;
  /** Query string as sent, without `?`. */
  query: string;
  /** Header values by lower-case name. */
  headers: Record<string, string>;
  signedHeaders: string[];
  payload: Buffer | string;
}

export function canonicalRequest(input: SigV4Input): string {
  const segments = input.path.split('/').map((s) => uriEncode(decodeURIComponent(s)));
  const pairs = input.query
    ? input.query
        .split('&')
        .filter(Boolean)
        .map((p) => {
          const eq = p.indexOf('=');
          const k = eq < 0 ? p : p.slice(0, eq);
          const v = eq < 0 ? '' : p.slice(eq + 1);
          return [uriEncode(decodeURIComponent(k)), uriEncode(decodeURIComponent(v))] as const;
        })
        .sort((a, b) => (a[0] === b[0] ? (a[1] < b[1] ? -1 : 1) : a[0] < b[0] ? -1 : 1))
    : [];
  const names = [...input.signedHeaders].sort();
  return [
    input.method.toUpperCase(),
    segments.join('/') || '/',
    pairs.map(([k, v]) => `${k}=${v}`).join('&'),
    names.map((n) => `${n}:${(input.headers[n] ?? '').trim().replace(/\s+/g, ' ')}\n`).join(''),
    names.join(';'),
    sha256Hex(input.payload),
  ].join('\n');
}

export function stringToSign(amzDate: string, scope: string, canonical: string): string {
  return ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonical)].join('\n');
}

export function sigV4Signature(
  secret: string,
  amzDate: string,
  region: string,
  service: string,
  canonical: string,
): string {
  const date = amzDate.slice(0, 8);
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
  return createHmac('sha256', key)
    .update(stringToSign(amzDate, `${date}/${region}/${service}/aws4_request`, canonical), 'utf8')
    .digest('hex');
}

/* ------------------------------------------------------------------------------------------ */
/* The SES emulator                                                                            */
/* ------------------------------------------------------------------------------------------ */

export interface SesCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

/** A SendEmail the emulator accepted. */
export interface SesAccepted {
  messageId: string;
  request: RecordedRequest;
  body: any;
  /** `Content.Raw.Data`, decoded. */
  raw: Buffer;
}

const TAG = /^[A-Za-z0-9_-]{1,256}$/;
const SKEW_MS = 15 * 60 * 1000;

function awsError(status: number, code: string, message: string): EmulatorReply {
  return {
    status,
    headers: {
      'x-amzn-ErrorType': `${code}:http://internal.amazon.com/coral/com.amazonaws.sesv2/`,
      'x-amzn-RequestId': randomUUID(),
    },
    body: { message },
  };
}

/** SES's answers for the scripted modes and for error codes a test asks for by name. */
export const SES_ERRORS: Record<string, EmulatorReply> = {
  TooManyRequestsException: awsError(
    429,
    'TooManyRequestsException',
    'Maximum sending rate exceeded.',
  ),
  LimitExceededException: awsError(400, 'LimitExceededException', 'Daily message quota exceeded.'),
  InternalFailure: awsError(
    500,
    'InternalFailure',
    'The request processing has failed because of an unknown error, exception or failure.',
  ),
  ServiceUnavailable: awsError(
    503,
    'ServiceUnavailable',
    'The request has failed due to a temporary failure of the server.',
  ),
  AccountSuspendedException: awsError(
    400,
    'AccountSuspendedException',
    "The message can't be sent because the account's ability to send email has been permanently restricted.",
  ),
  SendingPausedException: awsError(
    400,
    'SendingPausedException',
    "The message can't be sent because the account's ability to send email is currently paused.",
  ),
  MailFromDomainNotVerifiedException: awsError(
    400,
    'MailFromDomainNotVerifiedException',
    "The message can't be sent because the sending domain isn't verified.",
  ),
  MessageRejectedUnverified: awsError(
    400,
    'MessageRejected',
    'Email address is not verified. The following identities failed the check in region US-EAST-1: sender@example.com',
  ),
  MessageRejected: awsError(
    400,
    'MessageRejected',
    "The message can't be sent because it contains invalid content.",
  ),
  BadRequestException: awsError(400, 'BadRequestException', 'Missing final @domain'),
};

const MODES: Record<Exclude<EmulatorMode, 'ok'>, string> = {
  throttle: 'TooManyRequestsException',
  server_error: 'InternalFailure',
  reject: 'MessageRejected',
  suspended: 'AccountSuspendedException',
};

export class SesEmulator {
  readonly accepted: SesAccepted[] = [];
  /** SubscribeURLs that were visited. */
  readonly confirmations: string[] = [];
  /** Configuration sets that exist in this account. */
  readonly configurationSets = new Set<string>(['ConfigSet']);
  /** What GetAccount reports: sending on or paused, out of the SES sandbox or not. */
  sendingEnabled = true;
  productionAccess = true;
  /** Named SES errors for the next requests (after the auth and shape checks), before the modes. */
  private readonly scripted: string[] = [];

  private constructor(
    readonly emulator: ProviderEmulator,
    readonly credentials: SesCredentials,
    private readonly now: () => number,
  ) {}

  static async start(
    credentials: SesCredentials,
    opts: { now?: () => number } = {},
  ): Promise<SesEmulator> {
    let self: SesEmulator | undefined;
    const emulator = await ProviderEmulator.start((req, mode) => self!.handle(req, mode));
    self = new SesEmulator(emulator, credentials, opts.now ?? Date.now);
    return self;
  }

  get url(): string {
    return this.emulator.url;
  }

  get requests(): RecordedRequest[] {
    return this.emulator.requests;
  }

  behave(mode: EmulatorMode, times = 1): this {
    this.emulator.behave(mode, times);
    return this;
  }

  /** The next `times` requests that pass the checks are answered with this SES error (a key of SES_ERRORS). */
  fail(code: keyof typeof SES_ERRORS, times = 1): this {
    for (let i = 0; i < times; i++) this.scripted.push(code);
    return this;
  }

  close(): Promise<void> {
    return this.emulator.close();
  }

  private handle(req: RecordedRequest, mode: EmulatorMode): EmulatorReply {
    const url = new URL(req.url, 'http://emulator');
    if (req.method === 'GET' && url.searchParams.get('Action') === 'ConfirmSubscription') {
      this.confirmations.push(req.url);
      const arn = `${url.searchParams.get('TopicArn') ?? 'arn:aws:sns:us-east-1:123456789012:unknown'}:${randomUUID()}`;
      return {
        status: 200,
        headers: { 'content-type': 'text/xml' },
        body: `<ConfirmSubscriptionResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><ConfirmSubscriptionResult><SubscriptionArn>${arn}</SubscriptionArn></ConfirmSubscriptionResult><ResponseMetadata><RequestId>${randomUUID()}</RequestId></ResponseMetadata></ConfirmSubscriptionResponse>`,
      };
    }
    // SES v2 GetAccount (GET /v2/email/account), signed like every call: the console's connection check.
    if (req.method === 'GET' && url.pathname === '/v2/email/account') {
      const refused = this.checkSignature(req, url);
      if (refused) return refused;
      return {
        status: 200,
        headers: { 'x-amzn-RequestId': randomUUID() },
        body: {
          DedicatedIpAutoWarmupEnabled: false,
          EnforcementStatus: 'HEALTHY',
          ProductionAccessEnabled: this.productionAccess,
          SendingEnabled: this.sendingEnabled,
          SendQuota: {
            Max24HourSend: 50000,
            MaxSendRate: 14,
            SentLast24Hours: this.accepted.length,
          },
        },
      };
    }
    if (req.method !== 'POST' || url.pathname !== '/v2/email/outbound-emails')
      return awsError(404, 'UnknownOperationException', 'Unknown operation');

    const auth = this.checkSignature(req, url);
    if (auth) return auth;

    if (!/^application\/json\b/i.test(String(req.headers['content-type'] ?? '')))
      return awsError(400, 'SerializationException', 'Content-Type must be application/json');
    let body: any;
    try {
      body = JSON.parse(req.body.toString('utf8'));
    } catch {
      return awsError(400, 'SerializationException', 'Unable to parse the request body as JSON');
    }
    const data = body?.Content?.Raw?.Data;
    if (typeof data !== 'string' || body.Content.Simple || body.Content.Template)
      return awsError(
        400,
        'BadRequestException',
        'Content must contain exactly one of Simple, Raw or Template',
      );
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data))
      return awsError(400, 'SerializationException', 'Content.Raw.Data is not base64');
    const raw = Buffer.from(data, 'base64');
    const head = raw.subarray(0, Math.max(0, raw.indexOf('\r\n\r\n'))).toString('latin1');
    if (!head || !/^From:/im.test(head))
      return awsError(
        400,
        'MessageRejected',
        'Illegal header: the message has no From header or no body',
      );
    const dest = body.Destination ?? {};
    const all = [
      ...(dest.ToAddresses ?? []),
      ...(dest.CcAddresses ?? []),
      ...(dest.BccAddresses ?? []),
    ];
    if (!all.every((a: unknown) => typeof a === 'string' && /^[^@\s]+@[^@\s]+$/.test(a)))
      return awsError(400, 'BadRequestException', 'Missing final @domain');
    if (all.length === 0 || all.length > 50)
      return awsError(400, 'BadRequestException', 'Recipient count must be between 1 and 50');
    if (body.FromEmailAddress !== undefined && !/^[^@\s]+@[^@\s]+$/.test(body.FromEmailAddress))
      return awsError(400, 'BadRequestException', 'Invalid FromEmailAddress');
    for (const tag of body.EmailTags ?? []) {
      if (!TAG.test(tag?.Name ?? '') || !TAG.test(tag?.Value ?? ''))
        return awsError(400, 'BadRequestException', `Invalid tag: ${JSON.stringify(tag)}`);
    }
    if (
      body.ConfigurationSetName !== undefined &&
      !this.configurationSets.has(body.ConfigurationSetName)
    ) {
      return awsError(
        404,
        'NotFoundException',
        `Configuration set <${body.ConfigurationSetName}> does not exist.`,
      );
    }

    const scripted = this.scripted.shift();
    if (scripted) return SES_ERRORS[scripted];
    if (mode !== 'ok') return SES_ERRORS[MODES[mode]];

    const n = this.emulator.nextId();
    const messageId = `010001${(0x8e00000000 + n).toString(16)}-${randomUUID()}-000000`;
    this.accepted.push({ messageId, request: req, body, raw });
    return {
      status: 200,
      headers: { 'x-amzn-RequestId': randomUUID() },
      body: { MessageId: messageId },
    };
  }

  /** SigV4 as AWS checks it; `null` when the request is properly signed by the known key. */
  private checkSignature(req: RecordedRequest, url: URL): EmulatorReply | null {
    const authorization = String(req.headers.authorization ?? '');
    if (!authorization)
      return awsError(403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
    const m =
      /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(
        authorization,
      );
    if (!m)
      return awsError(
        400,
        'IncompleteSignatureException',
        `Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters. Authorization=${authorization.split(' ')[0]}`,
      );
    const [, keyId, date, region, service, signedList, signature] = m;
    if (keyId !== this.credentials.accessKeyId)
      return awsError(
        403,
        'UnrecognizedClientException',
        'The security token included in the request is invalid.',
      );
    if (region !== this.credentials.region)
      return awsError(
        403,
        'InvalidSignatureException',
        `Credential should be scoped to a valid region. `,
      );
    if (service !== 'ses')
      return awsError(
        403,
        'InvalidSignatureException',
        "Credential should be scoped to correct service: 'ses'. ",
      );
    const amzDate = String(req.headers['x-amz-date'] ?? '');
    const signedHeaders = signedList.split(';');
    if (
      !/^\d{8}T\d{6}Z$/.test(amzDate) ||
      !signedHeaders.includes('host') ||
      !signedHeaders.includes('x-amz-date')
    ) {
      return awsError(
        400,
        'IncompleteSignatureException',
        "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
      );
    }
    if (amzDate.slice(0, 8) !== date)
      return awsError(
        403,
        'InvalidSignatureException',
        `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${date}' != '${amzDate.slice(0, 8)}'`,
      );
    const sent = Date.parse(
      `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
    );
    if (Math.abs(this.now() - sent) > SKEW_MS)
      return awsError(
        403,
        'InvalidSignatureException',
        `Signature expired: ${amzDate} is now earlier than the allowed window.`,
      );
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      headers[k.toLowerCase()] = Array.isArray(v) ? v.join(',') : String(v ?? '');
    const canonical = canonicalRequest({
      method: req.method,
      path: url.pathname,
      query: url.search.slice(1),
      headers,
      signedHeaders,
      payload: req.body,
    });
    const expected = sigV4Signature(
      this.credentials.secretAccessKey,
      amzDate,
      region,
      service,
      canonical,
    );
    if (expected !== signature) {
      return awsError(
        403,
        'InvalidSignatureException',
        `The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.\n\nThe Canonical String for this request should have been\n'${canonical}'\n\nThe String-to-Sign should have been\n'${stringToSign(amzDate, `${date}/${region}/${service}/aws4_request`, canonical)}'\n`,
      );
    }
    return null;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* SNS: a signing certificate of our own, and signed SES notifications                        */
/* ------------------------------------------------------------------------------------------ */

export interface SnsEnvelope {
  Type: 'Notification' | 'SubscriptionConfirmation' | 'UnsubscribeConfirmation';
  MessageId: string;
  TopicArn: string;
  Subject?: string;
  Message: string;
  Timestamp: string;
  SignatureVersion: '1' | '2';
  Signature: string;
  SigningCertURL: string;
  SubscribeURL?: string;
  Token?: string;
  UnsubscribeURL?: string;
}

/**
 * Stands in for SNS's signing: a self-signed RSA certificate written into a directory (used as
 * `feedback.sns_certificate_dir`, the file named like SNS's), and messages signed as SNS signs
 * them (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA, over the documented string).
 */
export class SnsSigner {
  readonly certName = `SimpleNotificationService-${randomUUID().replace(/-/g, '')}.pem`;
  readonly certUrl: string;

  private constructor(
    readonly dir: string,
    private readonly privateKey: string,
    readonly region: string,
  ) {
    this.certUrl = `https://sns.${region}.amazonaws.com/${this.certName}`;
  }

  static async create(
    region = 'us-east-1',
    opts: { notBefore?: Date; notAfter?: Date } = {},
  ): Promise<SnsSigner> {
    const pems = await generate([{ name: 'commonName', value: 'sns.amazonaws.com' }], {
      keySize: 2048,
      algorithm: 'sha256',
      notBeforeDate: opts.notBefore ?? new Date(Date.now() - 86_400_000),
      notAfterDate: opts.notAfter ?? new Date(Date.now() + 30 * 86_400_000),
    });
    const dir = mkdtempSync(path.join(tmpdir(), 'postern-sns-'));
    const signer = new SnsSigner(dir, pems.private, region);
    writeFileSync(path.join(dir, signer.certName), pems.cert);
    return signer;
  }

  /** SNS's string to sign, from the SNS developer guide (fields in byte order; Subject only if present). */
  static stringToSign(
    m: Omit<SnsEnvelope, 'Signature' | 'SignatureVersion' | 'SigningCertURL'>,
  ): string {
    const fields =
      m.Type === 'Notification'
        ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
        : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
    return fields
      .filter((f) => (m as Record<string, unknown>)[f] !== undefined)
      .map((f) => `${f}\n${(m as Record<string, unknown>)[f]}\n`)
      .join('');
  }

  sign(
    m: Omit<SnsEnvelope, 'Signature' | 'SignatureVersion' | 'SigningCertURL'>,
    version: '1' | '2' = '1',
  ): SnsEnvelope {
    const signer = createSign(version === '1' ? 'RSA-SHA1' : 'RSA-SHA256');
    signer.update(SnsSigner.stringToSign(m), 'utf8');
    return {
      ...m,
      SignatureVersion: version,
      Signature: signer.sign(this.privateKey, 'base64'),
      SigningCertURL: this.certUrl,
    };
  }

  /** A signed Notification carrying an SES record, as SNS posts it (body and headers). */
  notification(
    record: unknown,
    opts: {
      topicArn?: string;
      messageId?: string;
      timestamp?: Date;
      version?: '1' | '2';
      subject?: string;
    } = {},
  ): { body: string; headers: Record<string, string>; envelope: SnsEnvelope } {
    const topicArn = opts.topicArn ?? `arn:aws:sns:${this.region}:123456789012:ses-feedback`;
    const envelope = this.sign(
      {
        Type: 'Notification',
        MessageId: opts.messageId ?? randomUUID(),
        TopicArn: topicArn,
        ...(opts.subject !== undefined ? { Subject: opts.subject } : {}),
        Message: typeof record === 'string' ? record : JSON.stringify(record),
        Timestamp: (opts.timestamp ?? new Date()).toISOString(),
        UnsubscribeURL: `https://sns.${this.region}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=${topicArn}:${randomUUID()}`,
      },
      opts.version ?? '1',
    );
    return {
      body: JSON.stringify(envelope, null, 2),
      headers: SnsSigner.headers(envelope),
      envelope,
    };
  }

  /** A signed SubscriptionConfirmation whose SubscribeURL points at `confirmBase` (SNS, or the emulator). */
  subscriptionConfirmation(
    confirmBase: string,
    opts: { topicArn?: string; timestamp?: Date } = {},
  ): { body: string; headers: Record<string, string>; envelope: SnsEnvelope } {
    const topicArn = opts.topicArn ?? `arn:aws:sns:${this.region}:123456789012:ses-feedback`;
    const token = createHash('sha256').update(randomUUID()).digest('hex').repeat(2);
    const envelope = this.sign({
      Type: 'SubscriptionConfirmation',
      MessageId: randomUUID(),
      Token: token,
      TopicArn: topicArn,
      Message: `You have chosen to subscribe to the topic ${topicArn}.\nTo confirm the subscription, visit the SubscribeURL included in this message.`,
      SubscribeURL: `${confirmBase.replace(/\/+$/, '')}/?Action=ConfirmSubscription&TopicArn=${topicArn}&Token=${token}`,
      Timestamp: (opts.timestamp ?? new Date()).toISOString(),
    });
    return {
      body: JSON.stringify(envelope, null, 2),
      headers: SnsSigner.headers(envelope),
      envelope,
    };
  }

  static headers(envelope: SnsEnvelope): Record<string, string> {
    return {
      'content-type': 'text/plain; charset=UTF-8',
      'x-amz-sns-message-type': envelope.Type,
      'x-amz-sns-message-id': envelope.MessageId,
      'x-amz-sns-topic-arn': envelope.TopicArn,
      'user-agent': 'Amazon Simple Notification Service Agent',
    };
  }

  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
