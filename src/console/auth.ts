import type { IncomingMessage } from 'node:http';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import type { OperatorContext } from '../operator/context.js';
import { csrfTokenMatches, sessionPrincipal, tokenPrincipal, type Principal } from '../operator/sessions.js';
import { SlidingWindowLimiter } from '../policy/rateLimiter.js';
import { API_BASE } from './document.js';

export const SESSION_COOKIE = 'postern_session';
/** The cookie goes only to the console's own paths. */
const COOKIE_PATH = API_BASE.split('/').slice(0, 2).join('/') || '/';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The value of the session cookie, if the request carries one. */
export function sessionCookie(req: IncomingMessage): string | null {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim() || null;
  }
  return null;
}

/** `Set-Cookie` for a new session (HttpOnly, SameSite=Strict; Secure over TLS), or one that clears it. */
export function sessionCookieHeader(sessionId: string | null, secure: boolean): string {
  const attributes = [`Path=${COOKIE_PATH}`, 'HttpOnly', 'SameSite=Strict', ...(secure ? ['Secure'] : []), ...(sessionId === null ? ['Max-Age=0'] : [])];
  return [`${SESSION_COOKIE}=${sessionId ?? ''}`, ...attributes].join('; ');
}

export interface Authenticated {
  principal: Principal;
  /** The cookie's session id (to derive its CSRF token); null with a bearer token. */
  sessionId: string | null;
}

/**
 * Who sends the request: a bearer `pso_` token (no CSRF needed: a browser never adds it by
 * itself), else the session cookie, whose state-changing requests must carry the session's
 * CSRF token in `X-CSRF-Token`.
 */
export async function authenticateRequest(ctx: OperatorContext, req: IncomingMessage, config: PosternConfig): Promise<Authenticated> {
  const authorization = req.headers.authorization;
  if (authorization !== undefined) {
    const token = BEARER.exec(authorization)?.[1];
    const principal = token ? await tokenPrincipal(ctx, token) : null;
    if (!principal) throw new ContractError('invalid_operator_token');
    return { principal, sessionId: null };
  }
  const sessionId = sessionCookie(req);
  if (sessionId === null) throw new ContractError('unauthenticated');
  const found = await sessionPrincipal(ctx, sessionId, config.console.session_idle_seconds * 1000);
  if (found === 'expired') throw new ContractError('session_expired');
  if (found === null) throw new ContractError('unauthenticated');
  if (!SAFE_METHODS.has(req.method ?? 'GET')) {
    const header = req.headers['x-csrf-token'];
    if (!csrfTokenMatches(sessionId, Array.isArray(header) ? header[0] : header)) throw new ContractError('csrf_token_invalid');
  }
  return { principal: found, sessionId };
}

/**
 * Failed sign-ins, limited per client address and per email (lower-cased, whether or not an
 * operator has it, so the answer tells nothing), in one sliding window each. While either is
 * spent, sign-in answers 429 before any password is checked.
 */
export class SignInThrottle {
  private readonly perIp: SlidingWindowLimiter;
  private readonly perAccount: SlidingWindowLimiter;

  constructor(config: PosternConfig, clock: Clock) {
    const windowMs = config.console.sign_in_window_seconds * 1000;
    this.perIp = new SlidingWindowLimiter(config.console.sign_in_failures_per_ip, windowMs, clock);
    this.perAccount = new SlidingWindowLimiter(config.console.sign_in_failures_per_account, windowMs, clock);
  }

  check(ip: string, email: string): void {
    const wait = Math.max(this.perIp.waitMs(ip), this.perAccount.waitMs(email.trim().toLowerCase()));
    if (wait <= 0) return;
    const seconds = Math.max(1, Math.ceil(wait / 1000));
    throw new ContractError('sign_in_throttled', {
      message: `Too many failed sign-ins; retry in ${seconds} second${seconds === 1 ? '' : 's'}.`,
      headers: { 'Retry-After': String(seconds) },
    });
  }

  failed(ip: string, email: string): void {
    this.perIp.record(ip);
    this.perAccount.record(email.trim().toLowerCase());
  }
}
