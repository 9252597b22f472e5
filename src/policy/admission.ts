import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import type { Queries } from '../store/queries.js';
import { authenticate, bearerKey, type AuthContext, type Environment } from './apiKeys.js';
import { SlidingWindowLimiter } from './rateLimiter.js';

export type Route = 'send' | 'batch';

function rateLimited(waitMs: number): ContractError {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  return new ContractError('rate_limited', {
    message: `Too many requests; retry in ${seconds} second${seconds === 1 ? '' : 's'}.`,
    headers: { 'Retry-After': String(seconds) },
  });
}

/**
 * Who may send right now: authentication, then rate limits. Requests without a valid key
 * share a tight per-IP window; once an IP has spent it, they get 429 instead of 401. A valid
 * key is never held by that window, only by its own per route ("rate budgets are per key"):
 * one misconfigured client must not lock out every other client behind the same address (a
 * NAT, a shared host). A bad key costs one hash and one indexed lookup either way.
 */
export class Admission {
  private unauthenticated: SlidingWindowLimiter;
  private perKey: Record<Route, SlidingWindowLimiter>;
  private readonly enforce: boolean;

  constructor(
    private readonly store: Queries,
    private readonly clock: Clock,
    config: Pick<PosternConfig, 'rate_limits' | 'policy'>,
    /** Told of every key that authenticates a request (its "last used", kept by operator/keyUse.ts). */
    private readonly onKeyUsed: (keyId: string) => void = () => undefined,
  ) {
    this.enforce = config.policy.enabled;
    [this.unauthenticated, this.perKey] = Admission.limiters(config.rate_limits, clock);
  }

  private static limiters(limits: PosternConfig['rate_limits'], clock: Clock): [SlidingWindowLimiter, Record<Route, SlidingWindowLimiter>] {
    const windowMs = limits.window_seconds * 1000;
    return [
      new SlidingWindowLimiter(limits.unauthenticated_per_ip, windowMs, clock),
      { send: new SlidingWindowLimiter(limits.send_per_key, windowMs, clock), batch: new SlidingWindowLimiter(limits.batch_per_key, windowMs, clock) },
    ];
  }

  /** New rate limits (SIGHUP): every window starts afresh under them. */
  updateRateLimits(limits: PosternConfig['rate_limits']): void {
    [this.unauthenticated, this.perKey] = Admission.limiters(limits, this.clock);
  }

  /** An HTTP request: its bearer key, then its route's window. */
  async admit(clientIp: string, authorization: string | undefined, environment: Environment, route: Route): Promise<AuthContext> {
    const auth = await this.authenticateClient(clientIp, bearerKey(authorization), environment);
    this.takeRequest(auth, route);
    return auth;
  }

  /** Milliseconds before this IP's next request without a valid key is answered other than 429. */
  unauthenticatedWaitMs(clientIp: string): number {
    return this.enforce ? this.unauthenticated.waitMs(clientIp) : 0;
  }

  /**
   * Requests authenticated some other way (provider feedback signatures) share the same per-IP
   * window: refused while it is spent; `failed` records a refusal in it.
   */
  admitUnauthenticated(clientIp: string): void {
    const wait = this.unauthenticatedWaitMs(clientIp);
    if (wait > 0) throw rateLimited(wait);
  }

  recordUnauthenticatedFailure(clientIp: string): void {
    if (this.enforce) this.unauthenticated.record(clientIp);
  }

  /**
   * Authenticates a key (HTTP bearer or SMTP AUTH password). A failure counts against the IP,
   * and once the IP's window is spent the failure is answered 429 (not counted again).
   */
  async authenticateClient(clientIp: string, key: string | null, environment: Environment): Promise<AuthContext> {
    try {
      const auth = await authenticate(this.store, key, environment, this.clock);
      this.onKeyUsed(auth.keyId);
      return auth;
    } catch (err) {
      const wait = this.unauthenticatedWaitMs(clientIp);
      if (wait > 0) throw rateLimited(wait);
      if (this.enforce) this.unauthenticated.record(clientIp);
      throw err;
    }
  }

  /**
   * A key that authenticated this client before (an SMTP session's AUTH), checked again so that
   * revocation, expiry and a project's pause apply mid-session. A failure here is not the
   * client guessing keys: it does not count against its IP.
   */
  reauthenticate(key: string, environment: Environment): Promise<AuthContext> {
    return authenticate(this.store, key, environment, this.clock);
  }

  /** One request (an HTTP call, or one SMTP message) in the key's window for `route`. */
  takeRequest(auth: AuthContext, route: Route): void {
    if (!this.enforce) return;
    const wait = this.perKey[route].take(auth.keyId);
    if (wait > 0) throw rateLimited(wait);
  }
}
