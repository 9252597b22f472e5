import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import type { Queries } from '../store/queries.js';
import {
  type AuthContext,
  authenticate,
  bearerKey,
  type Environment,
  type PolicyRead,
} from './apiKeys.js';
import type { RateWindow } from './rateWindow.js';
import type { RateWindowFactory } from './rateWindowFactory.js';

export type Route = 'send' | 'batch';

/** Throws 429 when there is a wait (the in-memory limiter answers at once, the shared one later). */
function admitted(wait: number | Promise<number>): void | Promise<void> {
  if (typeof wait !== 'number') return wait.then(admitted);
  if (wait > 0) throw rateLimited(wait);
}

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
 *
 * One node counts its windows in memory. On PostgreSQL the nodes count them together
 * (`RateWindowFactory`: one round trip per count), so a client spreading its requests over the
 * nodes gets no more than one node would give it.
 */
export class Admission {
  private unauthenticated: RateWindow;
  private perKey: Record<Route, RateWindow>;
  private readonly enforce: boolean;

  constructor(
    private readonly store: Queries,
    private readonly clock: Clock,
    config: Pick<PosternConfig, 'rate_limits' | 'policy'>,
    /** Makes the windows (and waits for the shared ones' prunes when the node stops). */
    private readonly windows: RateWindowFactory,
    /** Told of every key that authenticates a request (its "last used", kept by operator/keyUse.ts). */
    private readonly onKeyUsed: (keyId: string) => void = () => undefined,
  ) {
    this.enforce = config.policy.enabled;
    [this.unauthenticated, this.perKey] = this.limiters(config.rate_limits);
  }

  private limiters(limits: PosternConfig['rate_limits']): [RateWindow, Record<Route, RateWindow>] {
    const windowMs = limits.window_seconds * 1000;
    const window = (name: string, limit: number) => this.windows.window(name, limit, windowMs);
    return [
      window('unauthenticated', limits.unauthenticated_per_ip),
      { send: window('send', limits.send_per_key), batch: window('batch', limits.batch_per_key) },
    ];
  }

  /**
   * New rate limits (SIGHUP): every window starts afresh under them. (On PostgreSQL a window
   * is the cluster's, per limit and length: one left unchanged keeps counting.)
   */
  updateRateLimits(limits: PosternConfig['rate_limits']): void {
    [this.unauthenticated, this.perKey] = this.limiters(limits);
  }

  /**
   * An HTTP request: its bearer key, then its route's window. The key is read from this node's
   * policy cache when a window's take follows (takeRequest checks it against the database).
   */
  async admit(
    clientIp: string,
    authorization: string | undefined,
    environment: Environment,
    route: Route,
  ): Promise<AuthContext> {
    const key = bearerKey(authorization);
    const read: PolicyRead = this.enforce ? 'cached' : 'checked';
    return this.takeRequest(
      key!,
      await this.authenticateOrCount(clientIp, key, environment, read),
      read,
      route,
      true,
    );
  }

  /** Milliseconds before this IP's next request without a valid key is answered other than 429. */
  unauthenticatedWaitMs(clientIp: string): number | Promise<number> {
    return this.enforce ? this.unauthenticated.waitMs(clientIp) : 0;
  }

  /**
   * Requests authenticated some other way (provider feedback signatures) share the same per-IP
   * window: refused while it is spent; `recordUnauthenticatedFailure` records a refusal in it.
   */
  admitUnauthenticated(clientIp: string): void | Promise<void> {
    return admitted(this.unauthenticatedWaitMs(clientIp));
  }

  recordUnauthenticatedFailure(clientIp: string): void | Promise<void> {
    if (this.enforce) return this.unauthenticated.record(clientIp);
  }

  /** Authenticates a key (SMTP AUTH's password), from the database's policy now: see authenticateOrCount. */
  async authenticateClient(
    clientIp: string,
    key: string | null,
    environment: Environment,
  ): Promise<AuthContext> {
    const auth = await this.authenticateOrCount(clientIp, key, environment, 'checked');
    this.onKeyUsed(auth.keyId);
    return auth;
  }

  /**
   * A key that authenticated this client before (an SMTP session's AUTH), checked again and
   * its request taken in the key's window for `route` (one SMTP message): revocation, expiry
   * and a project's pause apply mid-session. A failure here is not the client guessing keys: it
   * does not count against its IP.
   */
  async readmit(key: string, environment: Environment, route: Route): Promise<AuthContext> {
    const read: PolicyRead = this.enforce ? 'cached' : 'checked';
    return this.takeRequest(
      key,
      await authenticate(this.store, key, environment, this.clock, read),
      read,
      route,
    );
  }

  /**
   * A failure counts against the IP, and once the IP's window is spent the failure is answered
   * 429 (not counted again). A failure read from the cache is as final as one read from the
   * database: a revocation, a project's deletion and an expiry are never undone, and a key the
   * database does not have is never cached.
   */
  private async authenticateOrCount(
    clientIp: string,
    key: string | null,
    environment: Environment,
    read: PolicyRead,
  ): Promise<AuthContext> {
    try {
      return await authenticate(this.store, key, environment, this.clock, read);
    } catch (err) {
      // One take: the failure is recorded unless the window is spent (then it is a 429), in one
      // step, so that nodes failing the same IP at once never let more than the limit through.
      if (this.enforce) await admitted(this.unauthenticated.take(clientIp));
      throw err;
    }
  }

  /**
   * One request in the key's window for `route`; throws 429 when it is spent. Resolves with the
   * key's context as of the database's policy now: a context `read` from this node's cache is
   * checked against the policy generation the window's take read (on PostgreSQL, in the same
   * statement), and the key authenticated again from the database when a policy row has
   * changed since (CLUSTER.md: policy changes act on the next request on every node). So a key
   * revoked through any node, or in the database by hand, is refused (401, before any 429) by
   * this request; the cache costs no round trip of its own.
   */
  private async takeRequest(
    key: string,
    auth: AuthContext,
    read: PolicyRead,
    route: Route,
    noteUse = false,
  ): Promise<AuthContext> {
    const reserved = this.enforce ? await this.perKey[route].reserve(auth.keyId) : null;
    const current =
      read === 'checked' || auth.policyGeneration === reserved?.policyGeneration
        ? auth
        : await authenticate(this.store, key, auth.environment, this.clock, 'checked');
    if (noteUse) this.onKeyUsed(current.keyId);
    if (reserved) admitted(reserved.waitMs);
    return current;
  }
}
