/**
 * Checks a provider account without sending anything. SMTP relays: connect, TLS (STARTTLS or
 * implicit, as the account is set), AUTH, QUIT (nodemailer's `verify()`), exactly as the relay
 * adapter connects. HTTP APIs: the provider's documented authenticated read-only call.
 */
import os from 'node:os';
import aws4 from 'aws4';
import nodemailer from 'nodemailer';
import type { ProviderAccount } from '../contract/providerAccount.js';
import { BREVO_API } from './brevoApi.js';
import { baseUrl, callProviderApi, isResponse, replyText, type ApiResponse } from './httpApi.js';
import { MAILGUN_EU, MAILGUN_US } from './mailgunApi.js';
import { POSTMARK_API } from './postmarkApi.js';
import { RESEND_API } from './resendApi.js';
import { SENDGRID_API, SENDGRID_API_EU } from './sendgridApi.js';
import { amzDate, SES_DEFAULT_REGION } from './sesApi.js';
import { smtpRelayConnection } from './smtpRelay.js';

/** An account as the check reads it: its slug, settings and secrets, as the adapters read them. */
export type CheckedAccount = Pick<ProviderAccount, 'slug' | 'settings' | 'secrets'>;

export interface ConnectionCheck {
  /** False for a provider with no call that proves the credentials without sending. */
  checkable: boolean;
  /** Whether the account works (null when not checkable). */
  ok: boolean | null;
  /** What was checked: `smtp://host:port (STARTTLS, AUTH)` or `GET <url>`. */
  checked: string;
  /** Where it failed: `connect`, `tls`, `auth`, `request` (an API answered no); null when it did not. */
  failed_at: 'connect' | 'tls' | 'auth' | 'request' | null;
  /** The relay's or provider's words (never a credential). */
  message: string;
  duration_ms: number;
}

type Check = Omit<ConnectionCheck, 'duration_ms'>;

interface SmtpFailure extends Error {
  code?: string;
  response?: string;
  command?: string;
}

async function checkSmtp(account: CheckedAccount, timeoutMs: number): Promise<Check> {
  const connection = smtpRelayConnection(account.slug, account.settings, account.secrets);
  const mode = connection.secure ? 'implicit TLS' : connection.requireTLS ? 'STARTTLS' : 'no TLS';
  const checked = `smtp://${connection.host}:${connection.port} (${mode}${connection.auth ? ', AUTH' : ''})`;
  const transport = nodemailer.createTransport({
    ...connection,
    name: os.hostname(),
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  });
  try {
    await transport.verify();
    return { checkable: true, ok: true, checked, failed_at: null, message: connection.auth ? 'connected, TLS and AUTH accepted' : 'connected (no credentials set: AUTH not tried)' };
  } catch (err) {
    const e = err as SmtpFailure;
    const failedAt = e.code === 'EAUTH' || e.code === 'ENOAUTH' ? 'auth' : e.code === 'ETLS' || /STARTTLS/i.test(e.command ?? '') ? 'tls' : 'connect';
    return { checkable: true, ok: false, checked, failed_at: failedAt, message: e.response ?? e.message };
  } finally {
    transport.close();
  }
}

interface ApiCall {
  url: string;
  headers: Record<string, string>;
  /** Reads a 2xx answer (or a refusal that still proves the key, Resend's send-only keys): ok and a message. */
  judge(res: ApiResponse): { ok: boolean; message: string } | null;
  /** Added to a 401/403's words: why a working key may still be refused here. */
  refusalHint?: string;
}

function json(res: ApiResponse): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(res.text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

const ok2xx = (message: string) => (res: ApiResponse) => (res.status >= 200 && res.status < 300 ? { ok: true, message } : null);

/** The documented read-only call of each HTTP API, authenticated as its sends are. */
const apiCalls: Record<string, (a: CheckedAccount, now: number) => ApiCall | string> = {
  // Amazon SES v2 GetAccount.
  'provider-a-api': (a, now) => {
    if (!a.settings.user || !a.secrets.api_key) return 'provider-a-api needs the access key id (--user) and the secret access key (--api-key)';
    const region = a.settings.region ?? SES_DEFAULT_REGION;
    const url = new URL(`${baseUrl(a.settings.endpoint, `https://email.${region}.amazonaws.com`)}/v2/email/account`);
    const signed = aws4.sign(
      { host: url.host, method: 'GET', path: url.pathname, service: 'ses', region, headers: { 'X-Amz-Date': amzDate(now) } },
      { accessKeyId: a.settings.user, secretAccessKey: a.secrets.api_key },
    );
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(signed.headers ?? {})) if (name.toLowerCase() !== 'host' && value !== undefined) headers[name] = String(value);
    return {
      url: url.href,
      headers,
      judge: (res) => {
        if (res.status !== 200) return null;
        const body = json(res);
        const enabled = body.SendingEnabled !== false;
        return { ok: enabled, message: enabled ? `sending enabled${body.ProductionAccessEnabled === false ? ' (sandbox: verified recipients only)' : ''}` : 'sending is paused on this account' };
      },
    };
  },
  // SendGrid: the key's scopes; sending needs mail.send.
  'provider-b-api': (a) => ({
    url: `${baseUrl(a.settings.endpoint, a.settings.region?.toLowerCase() === 'eu' ? SENDGRID_API_EU : SENDGRID_API)}/v3/scopes`,
    headers: { authorization: `Bearer ${a.secrets.api_key ?? ''}` },
    judge: (res) => {
      if (res.status !== 200) return null;
      const scopes = json(res).scopes;
      const canSend = Array.isArray(scopes) && scopes.includes('mail.send');
      return { ok: canSend, message: canSend ? 'key accepted, with the mail.send scope' : 'key accepted, but it lacks the mail.send scope' };
    },
  }),
  // Mailgun: the sending domain. A domain sending key may only send, so it is refused here.
  'provider-c-api': (a) => ({
    url: `${baseUrl(a.settings.endpoint, a.settings.region?.toLowerCase() === 'eu' ? MAILGUN_EU : MAILGUN_US)}/v3/domains/${encodeURIComponent(a.settings.domain ?? '')}`,
    headers: { authorization: `Basic ${Buffer.from(`api:${a.secrets.api_key ?? ''}`).toString('base64')}`, accept: 'application/json' },
    judge: (res) => {
      if (res.status !== 200) return null;
      const domain = json(res).domain as { state?: unknown } | undefined;
      const state = typeof domain?.state === 'string' ? domain.state : 'unknown';
      return { ok: state === 'active', message: `domain ${a.settings.domain} is ${state}` };
    },
    refusalHint: 'a domain sending key may only send, so it cannot be checked: check with a private API key, or send a test message',
  }),
  // Resend: the account's domains. A sending-only key is refused with restricted_api_key, which proves it valid.
  'provider-d-api': (a) => ({
    url: `${baseUrl(a.settings.endpoint, RESEND_API)}/domains`,
    headers: { authorization: `Bearer ${a.secrets.api_key ?? ''}` },
    judge: (res) => {
      if (res.status === 200) return { ok: true, message: 'key accepted (full access)' };
      if (res.status === 401 && json(res).name === 'restricted_api_key') return { ok: true, message: 'key accepted (sending access only)' };
      return null;
    },
  }),
  // Postmark: the server the token belongs to.
  'provider-e-api': (a) => ({
    url: `${baseUrl(a.settings.endpoint, POSTMARK_API)}/server`,
    headers: { 'x-postmark-server-token': a.secrets.api_key ?? '', accept: 'application/json' },
    judge: ok2xx('server token accepted'),
  }),
  // Brevo: the account.
  'provider-f-api': (a) => ({
    url: `${baseUrl(a.settings.endpoint, BREVO_API)}/v3/account`,
    headers: { 'api-key': a.secrets.api_key ?? '', accept: 'application/json' },
    judge: ok2xx('API key accepted'),
  }),
};

async function checkApi(account: CheckedAccount, timeoutMs: number, now: number): Promise<Check> {
  const call = apiCalls[account.slug]?.(account, now);
  if (call === undefined) return { checkable: false, ok: null, checked: 'nothing', failed_at: null, message: `${account.slug} has no call that checks credentials without sending` };
  if (typeof call === 'string') return { checkable: true, ok: false, checked: 'the account settings', failed_at: 'auth', message: call };
  const checked = `GET ${call.url}`;
  const res = await callProviderApi({ method: 'GET', url: call.url, headers: call.headers, timeoutMs });
  if (!isResponse(res)) return { checkable: true, ok: false, checked, failed_at: 'connect', message: res.reply };
  const verdict = call.judge(res);
  if (verdict) return { checkable: true, ok: verdict.ok, checked, failed_at: verdict.ok ? null : 'request', message: verdict.message };
  const refused = res.status === 401 || res.status === 403;
  const message = refused && call.refusalHint ? `${replyText(res, 300)} (${call.refusalHint})` : replyText(res, 300);
  return { checkable: true, ok: false, checked, failed_at: refused ? 'auth' : 'request', message };
}

/** Checks one account; never throws for what the network or the provider answers. */
export async function checkConnection(account: CheckedAccount, opts: { timeoutMs: number; now?: number }): Promise<ConnectionCheck> {
  const started = performance.now();
  const isSmtp = account.slug === 'smtp' || account.slug.endsWith('-smtp');
  const result = isSmtp ? await checkSmtp(account, opts.timeoutMs) : await checkApi(account, opts.timeoutMs, opts.now ?? Date.now());
  return { ...result, duration_ms: Math.round(performance.now() - started) };
}
