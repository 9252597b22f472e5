import type { Readable } from 'node:stream';
import type MailMessage from 'nodemailer/lib/mailer/mail-message';
import SMTPPool, { type SMTPPoolSentMessageInfo } from 'nodemailer/lib/smtp-pool';
import type {
  ProviderAccount,
  ProviderAccountSecrets,
  ProviderAccountSettings,
} from '../contract/providerAccount.js';
import {
  type AdapterDeps,
  type DeliveryJob,
  type ProviderAdapter,
  type RecipientRefusal,
  type SendResult,
  storedMimeStream,
} from './adapter.js';

export interface RelayDefaults {
  host: (region: string | null) => string;
  port: number;
  tls: 'starttls' | 'implicit';
}

/** What an SMTP slug declares; the relay adapter and its connection check are the same for every relay. */
export interface SmtpRelay {
  /** Null for the generic `smtp` slug: its accounts name their relay. */
  defaults: RelayDefaults | null;
  optionHeaders?: (options: Record<string, Record<string, string>>) => string;
  /** When it is not Postfix-style `queued as ID`. */
  messageIdFromReply?: (reply: string) => string | null;
}

/** A value with CR or LF (stored before validation refused them) is never written, so it cannot add header lines. */
export function optionHeader(name: string, value: string | undefined): string {
  return value && !/[\r\n]/.test(value) ? `${name}: ${value}\r\n` : '';
}

export function providerOptionHeaders(
  relay: SmtpRelay,
  options: Record<string, Record<string, string>> | null,
): string {
  return options && relay.optionHeaders ? relay.optionHeaders(options) : '';
}

interface SmtpError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  rejected?: string[];
  rejectedErrors?: SmtpError[];
}

const TEMPORARY_CODES = new Set([
  'ECONNECTION',
  'ETIMEDOUT',
  'ESOCKET',
  'EDNS',
  'ETLS',
  'EPROTOCOL',
  'ECONNRESET',
  'ECONNREFUSED',
  'EHOSTUNREACH',
]);

/** 5xx bounce, 4xx (or unknown) wait for a retry. */
function refusalsOf(err: { rejected?: string[]; rejectedErrors?: SmtpError[] }): {
  bounced: RecipientRefusal[];
  deferred: RecipientRefusal[];
} {
  const bounced: RecipientRefusal[] = [];
  const deferred: RecipientRefusal[] = [];
  (err.rejected ?? []).forEach((email, i) => {
    const e = err.rejectedErrors?.[i];
    const refusal = { email, reply: e?.response ?? 'rejected' };
    if ((e?.responseCode ?? 0) >= 500) bounced.push(refusal);
    else deferred.push(refusal);
  });
  return { bounced, deferred };
}

export function classifySmtpError(err: SmtpError): SendResult {
  const reply = err.response ?? err.message;
  const code = err.responseCode ?? 0;
  if (code >= 400 && code < 500) return { kind: 'temporary', reply };
  if (err.code === 'EAUTH') return { kind: 'account', reply };
  if (TEMPORARY_CODES.has(err.code ?? '') || code === 0) return { kind: 'temporary', reply };
  if (err.code === 'EENVELOPE') {
    const { bounced, deferred } = refusalsOf(err);
    if (deferred.length > 0) return { kind: 'temporary', reply, bounced };
    if (bounced.length > 0) return { kind: 'permanent', reply, bounced };
    // No recipient named: the sender was refused, which is the account's problem.
    return { kind: 'account', reply };
  }
  if (/^MAIL FROM/i.test(err.command ?? '')) return { kind: 'account', reply };
  return { kind: 'permanent', reply };
}

/** Postfix-style `queued as ID`, else the provider's own form (SES's `250 Ok <id>`, which its SNS feedback quotes). */
export function relayMessageId(relay: SmtpRelay, response: string): string | null {
  const queued = /queued as\s+(\S+)/i.exec(response);
  if (queued) return queued[1];
  return relay.messageIdFromReply?.(response) ?? null;
}

/** nodemailer's custom-transport message, straight from the spool: the stored MIME is final, so sendMail's compile would be wasted. */
function relayedMail(job: DeliveryJob, headers: string): MailMessage<SMTPPoolSentMessageInfo> {
  const envelope = () => ({ from: job.envelope.from, to: [...job.envelope.to] });
  const message = {
    getEnvelope: envelope,
    messageId: () => job.messageId,
    getHeader: (name: string) => (name.toLowerCase() === 'message-id' ? job.messageId : undefined),
    createReadStream: (): Readable => storedMimeStream(job, headers),
  };
  return { data: {}, message } as unknown as MailMessage<SMTPPoolSentMessageInfo>;
}

export function smtpRelayConnection(
  relay: SmtpRelay,
  settings: ProviderAccountSettings,
  secrets: ProviderAccountSecrets,
) {
  const { defaults } = relay;
  const tls = settings.tls ?? defaults?.tls ?? 'starttls';
  return {
    host: settings.host ?? defaults?.host(settings.region) ?? 'localhost',
    port: settings.port ?? defaults?.port ?? (tls === 'implicit' ? 465 : 587),
    secure: tls === 'implicit',
    requireTLS: tls === 'starttls',
    ignoreTLS: tls === 'none',
    auth:
      settings.user || secrets.pass
        ? { user: settings.user ?? '', pass: secrets.pass ?? '' }
        : undefined,
    // Relays inside a private network commonly present self-signed certificates; TLS still encrypts.
    tls: { rejectUnauthorized: false },
  };
}

export class SmtpRelayAdapter implements ProviderAdapter {
  /** An account loaded again with the same settings keeps its pool. */
  private readonly transports = new Map<string, SMTPPool>();
  private byAccount = new WeakMap<ProviderAccount, SMTPPool>();

  constructor(
    private readonly deps: AdapterDeps & { poolSize: number; name: string },
    private readonly relay: SmtpRelay,
  ) {}

  private transportFor(account: ProviderAccount): SMTPPool {
    let transport = this.byAccount.get(account);
    if (transport) return transport;
    const { settings, secrets } = account;
    const key = `${account.id}\u0000${JSON.stringify(settings)}\u0000${JSON.stringify(secrets)}`;
    transport = this.transports.get(key) ?? this.openPool(account);
    this.transports.set(key, transport);
    this.byAccount.set(account, transport);
    return transport;
  }

  private openPool({ settings, secrets }: ProviderAccount): SMTPPool {
    const transport = new SMTPPool({
      maxConnections: this.deps.poolSize,
      maxMessages: 1000,
      ...smtpRelayConnection(this.relay, settings, secrets),
      name: this.deps.name,
      connectionTimeout: this.deps.timeoutMs,
      greetingTimeout: this.deps.timeoutMs,
      socketTimeout: this.deps.timeoutMs,
    });
    transport.on('error', () => undefined);
    return transport;
  }

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const headers = job.prependHeaders + providerOptionHeaders(this.relay, job.providerOptions);
    const transport = this.transportFor(account);
    try {
      const info = await new Promise<SMTPPoolSentMessageInfo & { rejectedErrors?: SmtpError[] }>(
        (resolve, reject) =>
          transport.send(relayedMail(job, headers), (err, sent) =>
            err || !sent ? reject(err ?? new Error('no reply from the relay')) : resolve(sent),
          ),
      );
      return {
        kind: 'sent',
        providerMessageId: relayMessageId(this.relay, info.response ?? ''),
        reply: info.response ?? '250',
        ...refusalsOf(info),
      };
    } catch (err) {
      return classifySmtpError(err as SmtpError);
    }
  }

  async close(): Promise<void> {
    for (const t of this.transports.values()) t.close();
    this.transports.clear();
    this.byAccount = new WeakMap();
  }
}
