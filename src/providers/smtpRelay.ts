import type { Readable } from 'node:stream';
import type MailMessage from 'nodemailer/lib/mailer/mail-message';
import SMTPPool, { type SMTPPoolSentMessageInfo } from 'nodemailer/lib/smtp-pool';
import type { ProviderAccount, ProviderAccountSecrets, ProviderAccountSettings } from '../contract/providerAccount.js';
import { storedMimeStream, type AdapterDeps, type DeliveryJob, type ProviderAdapter, type RecipientRefusal, type SendResult } from './adapter.js';

interface SmtpDefaults {
  host: (region: string | null) => string;
  port: number;
  tls: 'starttls' | 'implicit';
}

/**
 * Default relay endpoints of the `provider-*-smtp` slugs (any of them can be overridden with
 * --host/--port/--tls). a: Amazon SES (regional), b: SendGrid, c: Mailgun (region `eu` for its
 * EU host), d: Resend, e: Postmark, f: Brevo, g: Gmail / Google Workspace.
 */
export const SMTP_DEFAULTS: Record<string, SmtpDefaults> = {
  'provider-a-smtp': { host: (r) => `email-smtp.${r ?? 'us-east-1'}.amazonaws.com`, port: 587, tls: 'starttls' },
  'provider-b-smtp': { host: () => 'smtp.sendgrid.net', port: 587, tls: 'starttls' },
  'provider-c-smtp': { host: (r) => (r === 'eu' ? 'smtp.eu.mailgun.org' : 'smtp.mailgun.org'), port: 587, tls: 'starttls' },
  'provider-d-smtp': { host: () => 'smtp.resend.com', port: 587, tls: 'starttls' },
  'provider-e-smtp': { host: () => 'smtp.postmarkapp.com', port: 587, tls: 'starttls' },
  'provider-f-smtp': { host: () => 'smtp-relay.brevo.com', port: 587, tls: 'starttls' },
  'provider-g-smtp': { host: () => 'smtp.gmail.com', port: 587, tls: 'starttls' },
};

/**
 * provider_options a relay understands as headers: SES configuration sets, Postmark message
 * streams. Validation refuses CR and LF in them; a value with either (stored before that rule)
 * is never written, so it cannot add header lines of its own.
 */
export function providerOptionHeaders(slug: string, options: Record<string, Record<string, string>> | null): string {
  if (!options) return '';
  const header = (name: string, value: string | undefined) => (value && !/[\r\n]/.test(value) ? `${name}: ${value}\r\n` : '');
  if (slug === 'provider-a-smtp') return header('X-SES-CONFIGURATION-SET', options['provider-a-api']?.configuration_set);
  if (slug === 'provider-e-smtp') return header('X-PM-Message-Stream', options['provider-e-api']?.message_stream);
  return '';
}

interface SmtpError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  rejected?: string[];
  rejectedErrors?: SmtpError[];
}

const TEMPORARY_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ETLS', 'EPROTOCOL', 'ECONNRESET', 'ECONNREFUSED', 'EHOSTUNREACH']);

/** Recipients refused at RCPT, split by reply class: 5xx bounce, 4xx (or unknown) wait for a retry. */
function refusalsOf(err: { rejected?: string[]; rejectedErrors?: SmtpError[] }): { bounced: RecipientRefusal[]; deferred: RecipientRefusal[] } {
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

/** How an SMTP failure moves the message on: see SendResult. */
export function classifySmtpError(err: SmtpError): SendResult {
  const reply = err.response ?? err.message;
  const code = err.responseCode ?? 0;
  if (code >= 400 && code < 500) return { kind: 'temporary', reply };
  if (err.code === 'EAUTH') return { kind: 'account', reply };
  if (TEMPORARY_CODES.has(err.code ?? '') || code === 0) return { kind: 'temporary', reply };
  if (err.code === 'EENVELOPE') {
    const { bounced, deferred } = refusalsOf(err);
    // Every recipient refused: the 5xx ones bounce; any 4xx one makes the rest wait for a retry.
    if (deferred.length > 0) return { kind: 'temporary', reply, bounced };
    if (bounced.length > 0) return { kind: 'permanent', reply, bounced };
    // No recipient named: the sender was refused, which is the account's problem.
    return { kind: 'account', reply };
  }
  if (/^MAIL FROM/i.test(err.command ?? '')) return { kind: 'account', reply };
  return { kind: 'permanent', reply };
}

/**
 * The id a relay gives the message in its final 250: Postfix-style `queued as ID`, and Amazon
 * SES's `250 Ok <SES message id>` (the id its SNS feedback quotes).
 */
export function relayMessageId(slug: string, response: string): string | null {
  const queued = /queued as\s+(\S+)/i.exec(response);
  if (queued) return queued[1];
  if (slug === 'provider-a-smtp') return /^250\s+Ok\s+(\S+)/i.exec(response)?.[1] ?? null;
  return null;
}

/**
 * The message as nodemailer's transports read it (the `mail.data` / `mail.message` interface of
 * its custom-transport API), built straight from the spool: the stored MIME is final, so
 * sendMail's compile step (a MIME tree, a generated Message-ID and boundary per message) would
 * be work thrown away.
 */
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

/**
 * Where and how an account's relay is reached: its settings, else its slug's defaults. The
 * relay adapter and the connection check (providers/connectionCheck.ts) both connect this way.
 */
export function smtpRelayConnection(slug: string, settings: ProviderAccountSettings, secrets: ProviderAccountSecrets) {
  const defaults = SMTP_DEFAULTS[slug];
  const tls = settings.tls ?? defaults?.tls ?? 'starttls';
  return {
    host: settings.host ?? defaults?.host(settings.region) ?? 'localhost',
    port: settings.port ?? defaults?.port ?? (tls === 'implicit' ? 465 : 587),
    secure: tls === 'implicit',
    requireTLS: tls === 'starttls',
    ignoreTLS: tls === 'none',
    auth: settings.user || secrets.pass ? { user: settings.user ?? '', pass: secrets.pass ?? '' } : undefined,
    // Relays inside a private network commonly present self-signed certificates; TLS still
    // encrypts. Verification is the operator's choice per account in a later release.
    tls: { rejectUnauthorized: false },
  };
}

/**
 * The `smtp` and `provider-*-smtp` adapter: nodemailer's SMTP pool per account, STARTTLS or
 * implicit TLS, AUTH, the envelope from the index (Bcc included), and the stored MIME from the
 * spool with the hand-off headers in front.
 */
export class SmtpRelayAdapter implements ProviderAdapter {
  /** By account and its settings: an account loaded again with the same settings keeps its pool. */
  private readonly transports = new Map<string, SMTPPool>();
  /** The pool of each loaded account, so a hand-off does not build the key again. */
  private byAccount = new WeakMap<ProviderAccount, SMTPPool>();

  constructor(private readonly deps: AdapterDeps & { poolSize: number; name: string }) {}

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

  private openPool({ slug, settings, secrets }: ProviderAccount): SMTPPool {
    const transport = new SMTPPool({
      maxConnections: this.deps.poolSize,
      maxMessages: 1000,
      ...smtpRelayConnection(slug, settings, secrets),
      name: this.deps.name,
      connectionTimeout: this.deps.timeoutMs,
      greetingTimeout: this.deps.timeoutMs,
      socketTimeout: this.deps.timeoutMs,
    });
    transport.on('error', () => undefined);
    return transport;
  }

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const headers = job.prependHeaders + providerOptionHeaders(account.slug, job.providerOptions);
    const transport = this.transportFor(account);
    try {
      const info = await new Promise<SMTPPoolSentMessageInfo & { rejectedErrors?: SmtpError[] }>((resolve, reject) =>
        transport.send(relayedMail(job, headers), (err, sent) => (err || !sent ? reject(err ?? new Error('no reply from the relay')) : resolve(sent))),
      );
      return { kind: 'sent', providerMessageId: relayMessageId(account.slug, info.response ?? ''), reply: info.response ?? '250', ...refusalsOf(info) };
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
