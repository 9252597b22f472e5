/**
 * Checks a provider account without sending anything. SMTP relays: connect, TLS (STARTTLS or
 * implicit, as the account is set), AUTH, QUIT (nodemailer's `verify()`), exactly as the relay
 * adapter connects. HTTP APIs: the provider's documented authenticated read-only call, which
 * each provider declares (`<provider>/connectionCheck.ts`); this module makes it.
 */
import os from 'node:os';
import nodemailer from 'nodemailer';
import type { ProviderAccount } from '../contract/providerAccount.js';
import { callProviderApi, isResponse, replyText, type ApiResponse } from './httpApi.js';
import { smtpRelayConnection, type SmtpRelay } from './smtpRelay.js';

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

/** The read-only call an API provider declares: made with the account's credentials, judged by the provider. */
export interface ApiCall {
  url: string;
  headers: Record<string, string>;
  /** Reads a 2xx answer (or a refusal that still proves the key, Resend's send-only keys): ok and a message. */
  judge(res: ApiResponse): { ok: boolean; message: string } | null;
  /** Added to a 401/403's words: why a working key may still be refused here. */
  refusalHint?: string;
}

/** A provider's check of an API account: the call to make, or why the account cannot be checked as set (a missing credential). */
export type ApiConnectionCheck = (account: CheckedAccount, now: number) => ApiCall | string;

/** What a slug is checked with: its relay (SMTP slugs), or its API's declared call (none: not checkable). */
export type SlugCheck = { transport: 'smtp'; relay: SmtpRelay } | { transport: 'api'; connectionCheck?: ApiConnectionCheck };

/** A JSON object answer's fields (anything else reads as none). */
export function jsonFields(res: ApiResponse): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(res.text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** A judge for calls whose 2xx alone proves the credentials. */
export const ok2xx = (message: string) => (res: ApiResponse) => (res.status >= 200 && res.status < 300 ? { ok: true, message } : null);

interface SmtpFailure extends Error {
  code?: string;
  response?: string;
  command?: string;
}

async function checkSmtp(account: CheckedAccount, relay: SmtpRelay, timeoutMs: number): Promise<Check> {
  const connection = smtpRelayConnection(relay, account.settings, account.secrets);
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

async function checkApi(account: CheckedAccount, connectionCheck: ApiConnectionCheck | undefined, timeoutMs: number, now: number): Promise<Check> {
  const call = connectionCheck?.(account, now);
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

/** Checks one account as its slug declares (`slug`: undefined for a slug this build does not declare); never throws for what the network or the provider answers. */
export async function checkConnection(account: CheckedAccount, slug: SlugCheck | undefined, opts: { timeoutMs: number; now?: number }): Promise<ConnectionCheck> {
  const started = performance.now();
  const result =
    slug?.transport === 'smtp' ? await checkSmtp(account, slug.relay, opts.timeoutMs) : await checkApi(account, slug?.connectionCheck, opts.timeoutMs, opts.now ?? Date.now());
  return { ...result, duration_ms: Math.round(performance.now() - started) };
}
