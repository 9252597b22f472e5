/** Checks a provider account without sending: SMTP connect, TLS, AUTH, QUIT as the relay does; APIs the read-only call each declares. */
import os from 'node:os';
import nodemailer from 'nodemailer';
import type { ProviderAccount } from '../contract/providerAccount.js';
import { type ApiResponse, callProviderApi, isResponse, replyText } from './httpApi.js';
import { type SmtpRelay, smtpRelayConnection } from './smtpRelay.js';

export type CheckedAccount = Pick<ProviderAccount, 'slug' | 'settings' | 'secrets'>;

export interface ConnectionCheck {
  /** False for a provider with no call that proves the credentials without sending. */
  checkable: boolean;
  ok: boolean | null;
  checked: string;
  failed_at: 'connect' | 'tls' | 'auth' | 'request' | null;
  /** Never a credential. */
  message: string;
  duration_ms: number;
}

type Check = Omit<ConnectionCheck, 'duration_ms'>;

export interface ApiCall {
  url: string;
  headers: Record<string, string>;
  /** A 2xx, or a refusal that still proves the key (Resend's send-only keys). */
  judge(res: ApiResponse): { ok: boolean; message: string } | null;
  /** Added to a 401/403's words: why a working key may still be refused here. */
  refusalHint?: string;
}

/** The call to make, or why the account cannot be checked as set (a missing credential). */
export type ApiConnectionCheck = (account: CheckedAccount, now: number) => ApiCall | string;

export type SlugCheck =
  | { transport: 'smtp'; relay: SmtpRelay }
  | { transport: 'api'; connectionCheck?: ApiConnectionCheck };

export function jsonFields(res: ApiResponse): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(res.text);
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

export const ok2xx = (message: string) => (res: ApiResponse) =>
  res.status >= 200 && res.status < 300 ? { ok: true, message } : null;

interface SmtpFailure extends Error {
  code?: string;
  response?: string;
  command?: string;
}

async function checkSmtp(
  account: CheckedAccount,
  relay: SmtpRelay,
  timeoutMs: number,
): Promise<Check> {
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
    return {
      checkable: true,
      ok: true,
      checked,
      failed_at: null,
      message: connection.auth
        ? 'connected, TLS and AUTH accepted'
        : 'connected (no credentials set: AUTH not tried)',
    };
  } catch (err) {
    const e = err as SmtpFailure;
    const failedAt =
      e.code === 'EAUTH' || e.code === 'ENOAUTH'
        ? 'auth'
        : e.code === 'ETLS' || /STARTTLS/i.test(e.command ?? '')
          ? 'tls'
          : 'connect';
    return {
      checkable: true,
      ok: false,
      checked,
      failed_at: failedAt,
      message: e.response ?? e.message,
    };
  } finally {
    transport.close();
  }
}

async function checkApi(
  account: CheckedAccount,
  connectionCheck: ApiConnectionCheck | undefined,
  timeoutMs: number,
  now: number,
): Promise<Check> {
  const call = connectionCheck?.(account, now);
  if (call === undefined)
    return {
      checkable: false,
      ok: null,
      checked: 'nothing',
      failed_at: null,
      message: `${account.slug} has no call that checks credentials without sending`,
    };
  if (typeof call === 'string')
    return {
      checkable: true,
      ok: false,
      checked: 'the account settings',
      failed_at: 'auth',
      message: call,
    };
  const checked = `GET ${call.url}`;
  const res = await callProviderApi({
    method: 'GET',
    url: call.url,
    headers: call.headers,
    timeoutMs,
  });
  if (!isResponse(res))
    return { checkable: true, ok: false, checked, failed_at: 'connect', message: res.reply };
  const verdict = call.judge(res);
  if (verdict)
    return {
      checkable: true,
      ok: verdict.ok,
      checked,
      failed_at: verdict.ok ? null : 'request',
      message: verdict.message,
    };
  const refused = res.status === 401 || res.status === 403;
  const message =
    refused && call.refusalHint
      ? `${replyText(res, 300)} (${call.refusalHint})`
      : replyText(res, 300);
  return { checkable: true, ok: false, checked, failed_at: refused ? 'auth' : 'request', message };
}

/** Never throws for what the network or the provider answers. */
export async function checkConnection(
  account: CheckedAccount,
  slug: SlugCheck | undefined,
  opts: { timeoutMs: number; now?: number },
): Promise<ConnectionCheck> {
  const started = performance.now();
  const result =
    slug?.transport === 'smtp'
      ? await checkSmtp(account, slug.relay, opts.timeoutMs)
      : await checkApi(account, slug?.connectionCheck, opts.timeoutMs, opts.now ?? Date.now());
  return { ...result, duration_ms: Math.round(performance.now() - started) };
}
