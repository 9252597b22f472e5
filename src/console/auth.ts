import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import type { Logger } from '../log.js';
import type { OperatorContext } from '../operator/context.js';
import {
  csrfTokenMatches,
  type Principal,
  sessionPrincipal,
  tokenPrincipal,
} from '../operator/sessions.js';
import type { RateSlot, RateWindow } from '../policy/rateWindow.js';
import type { RateWindowFactory } from '../policy/rateWindowFactory.js';
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
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE)
      return part.slice(eq + 1).trim() || null;
  }
  return null;
}

/** `Set-Cookie` for a new session (HttpOnly, SameSite=Strict; Secure over TLS), or one that clears it. */
export function sessionCookieHeader(sessionId: string | null, secure: boolean): string {
  const attributes = [
    `Path=${COOKIE_PATH}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(secure ? ['Secure'] : []),
    ...(sessionId === null ? ['Max-Age=0'] : []),
  ];
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
export async function authenticateRequest(
  ctx: OperatorContext,
  req: IncomingMessage,
  config: Pick<PosternConfig, 'console'>,
): Promise<Authenticated> {
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
    if (!csrfTokenMatches(sessionId, Array.isArray(header) ? header[0] : header))
      throw new ContractError('csrf_token_invalid');
  }
  return { principal: found, sessionId };
}

/**
 * The key an email's failed sign-ins count under: lower-cased and trimmed, as operators' emails
 * are matched, then hashed, so the shared windows (rows on PostgreSQL, kept by pg_dump) never
 * hold what someone typed into the email field (at times a password).
 */
function accountKey(email: string): string {
  return createHash('sha256').update(email.trim().toLowerCase()).digest('base64url');
}

/** A place a sign-in took in one of the failed sign-in windows. */
interface Place {
  readonly window: RateWindow;
  readonly key: string;
  readonly slot: RateSlot;
}

/** A sign-in's places in both windows, held while its password is checked. */
export interface SignInAttempt {
  readonly places: readonly Place[];
}

/** What a password is checked for: a sign-in, or a signed-in operator's current password (a change). */
export type PasswordCheck = 'sign_in' | 'current_password';

/** How a refusal reads, per check. */
const WORDS: Record<PasswordCheck, { throttled: string; unavailable: string; logged: string }> = {
  sign_in: {
    throttled: 'Too many failed sign-ins',
    unavailable: 'Sign-in is unavailable for a moment; retry shortly.',
    logged: 'the sign-in limits could not be counted (the store failed); sign-in refused',
  },
  current_password: {
    throttled: 'Too many wrong passwords for this account or from this address',
    unavailable: 'The password cannot be checked for a moment; retry shortly.',
    logged: 'the sign-in limits could not be counted (the store failed); password change refused',
  },
};

/**
 * Failed sign-ins, limited per client address and per email (whether or not an operator has
 * it, so the answer tells nothing), in one sliding window each: in this node's memory on
 * SQLite, the cluster's on PostgreSQL (`console_sign_in_ip`, `console_sign_in_account`), so
 * failures spread over the nodes count together. One per node, for all its console listeners.
 * A password change's check of the current password counts in the same windows (the
 * operator's email, the client's address): a stolen session or token gets no guesses beyond
 * what the sign-in form gives.
 *
 * Exact under concurrency: every attempt takes its place in both windows before its password
 * is checked (`reserve`), and one whose address or email has spent its failures is answered 429
 * without a check; a right password gives the places back (`succeeded`), so sign-ins that work
 * use up nothing. Checking first and counting the failure after the (slow) password check
 * would let every one of N guesses sent at once pass the check.
 *
 * When the windows cannot be read or written (the database is unreachable), sign-in fails
 * closed: 500, and no password is checked without its limits.
 */
export class SignInThrottle {
  private readonly perIp: RateWindow;
  private readonly perAccount: RateWindow;

  constructor(
    config: Pick<PosternConfig, 'console'>,
    windows: RateWindowFactory,
    private readonly logger: Logger,
  ) {
    const windowMs = config.console.sign_in_window_seconds * 1000;
    this.perIp = windows.window(
      'console_sign_in_ip',
      config.console.sign_in_failures_per_ip,
      windowMs,
    );
    this.perAccount = windows.window(
      'console_sign_in_account',
      config.console.sign_in_failures_per_account,
      windowMs,
    );
  }

  /**
   * Takes this attempt's place in the address's and the email's windows, counted as a failure
   * until `succeeded`. Throws 429 `sign_in_throttled` while either is spent, and then holds
   * neither place (the other window's is given back: the attempt was never checked).
   */
  async reserve(
    ip: string,
    email: string,
    check: PasswordCheck = 'sign_in',
  ): Promise<SignInAttempt> {
    const windows: [RateWindow, string][] = [
      [this.perIp, ip],
      [this.perAccount, accountKey(email)],
    ];
    const answers = await Promise.allSettled(windows.map(([window, key]) => window.reserve(key)));
    const places = windows.flatMap(([window, key], i) => {
      const answer = answers[i];
      return answer.status === 'fulfilled' && answer.value.slot !== null
        ? [{ window, key, slot: answer.value.slot }]
        : [];
    });
    if (places.length === windows.length) return { places };
    await this.giveBack(places);
    const failed = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected');
    if (failed) {
      this.logger.error({ err: failed.reason, step: 'reserve' }, WORDS[check].logged);
      throw new ContractError('server_error', { message: WORDS[check].unavailable });
    }
    const wait = Math.max(...answers.map((a) => (a.status === 'fulfilled' ? a.value.waitMs : 0)));
    const seconds = Math.max(1, Math.ceil(wait / 1000));
    throw new ContractError('sign_in_throttled', {
      message: `${WORDS[check].throttled}; retry in ${seconds} second${seconds === 1 ? '' : 's'}.`,
      headers: { 'Retry-After': String(seconds) },
    });
  }

  /** The password was right: the attempt's places are given back, so it uses up no failure. */
  succeeded(attempt: SignInAttempt): Promise<void> {
    return this.giveBack(attempt.places);
  }

  /**
   * A place that cannot be given back (the store failed) stays counted as a failure: stricter,
   * never looser. It is logged (no email or password), and the answer stands.
   */
  private async giveBack(places: readonly Place[]): Promise<void> {
    const results = await Promise.allSettled(places.map((p) => p.window.release(p.key, p.slot)));
    for (const r of results) {
      if (r.status === 'rejected')
        this.logger.warn(
          { err: r.reason, step: 'release' },
          'a sign-in could not give its place in the sign-in limits back (the store failed); it counts as a failure',
        );
    }
  }
}
