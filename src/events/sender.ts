import http from 'node:http';
import https from 'node:https';
import { bareHost, parseTargetUrl, pinnedLookup, resolveTarget, systemResolver, TargetError, type ResolvedAddress, type Resolver, type TargetPolicy } from './targets.js';
import { signatureHeader } from './signing.js';
import { StallClock } from './stallClock.js';

export const USER_AGENT = 'Postern-Webhooks/1.0';

/** One delivery attempt to make. */
export interface WebhookRequest {
  url: string;
  /** `we.…` */
  deliveryId: string;
  type: string;
  /** The envelope bytes: signed and sent as they are. */
  body: Buffer;
  /** Current secret first, then a previous one still in its grace period. */
  secrets: readonly string[];
  /** Unix seconds for `t=`. */
  timestamp: number;
}

/** What one attempt came to. `status` is the HTTP status when a response arrived. */
export interface AttemptResult {
  ok: boolean;
  status: number | null;
  error: string | null;
  /** From `Retry-After` on a 429 or 503. */
  retryAfterMs: number | null;
  /** True when the target was refused before any connection (address or scheme rules). */
  refused: boolean;
  /** The start of the receiver's answer (its body, up to ANSWER_CHARS), for the delivery log; null when none came. */
  answer?: string | null;
}

export interface SenderOptions {
  timeoutMs: number;
  policy: TargetPolicy;
  /** Sockets per endpoint (its concurrency). */
  maxSocketsPerEndpoint: number;
  resolver?: Resolver;
  /** Extra trusted CAs (tests with a self-signed receiver). */
  ca?: string | Buffer;
  /** Milliseconds since the epoch (for HTTP-date Retry-After). */
  now(): number;
}

/** How long a resolved (and checked) answer is reused before resolving again. */
const DNS_CACHE_MS = 30_000;
/** Idle keep-alive sockets are closed before a typical server's 5 s keep-alive timeout. */
const IDLE_SOCKET_MS = 4_000;
/** How much of an error response is kept for `last_error`. */
const ERROR_BODY_BYTES = 200;
/** How much of any answer is kept for the delivery log (read within the attempt's deadline). */
export const ANSWER_CHARS = 1024;
/** A stalled thread gets back at most this many timeouts' worth of time it could not watch. */
const MAX_STALL_GRACE_FACTOR = 4;

/**
 * Parses `Retry-After` (delta seconds or an HTTP date) into milliseconds from now; null when
 * absent or unreadable.
 */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now) : null;
}

const printable = (s: string) => s.replace(/\p{Cc}+/gu, ' ').trim();

/**
 * POSTs signed envelopes: one keep-alive agent per endpoint (at most its concurrency in
 * sockets), the target's addresses resolved and checked before every attempt and the socket
 * pinned to the checked address, one deadline for the whole exchange, no redirects.
 */
export class WebhookSender {
  private readonly agents = new Map<string, { agent: http.Agent; url: string }>();
  private readonly dns = new Map<string, { until: number; addresses: ResolvedAddress[] }>();
  private readonly resolver: Resolver;
  private readonly stalls = new StallClock();

  constructor(private readonly opts: SenderOptions) {
    this.resolver = opts.resolver ?? systemResolver;
  }

  private agentFor(endpointId: string, url: URL): http.Agent {
    const existing = this.agents.get(endpointId);
    if (existing && existing.url === url.origin) return existing.agent;
    existing?.agent.destroy();
    const common = { keepAlive: true, maxSockets: this.opts.maxSocketsPerEndpoint, maxFreeSockets: this.opts.maxSocketsPerEndpoint, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' as const };
    const agent = url.protocol === 'https:' ? new https.Agent({ ...common, ca: this.opts.ca }) : new http.Agent(common);
    this.agents.set(endpointId, { agent, url: url.origin });
    return agent;
  }

  /** Closes the sockets of endpoints that are gone. */
  forgetEndpointsExcept(ids: Set<string>): void {
    for (const [id, entry] of this.agents) {
      if (ids.has(id)) continue;
      entry.agent.destroy();
      this.agents.delete(id);
    }
  }

  close(): void {
    for (const entry of this.agents.values()) entry.agent.destroy();
    this.agents.clear();
  }

  /**
   * The checked addresses of the URL's host. An answer (resolved AND checked, for this scheme
   * and host) is reused for DNS_CACHE_MS; a refusal is never cached, so a fixed DNS record
   * takes effect at the next attempt.
   */
  private async resolve(url: URL): Promise<ResolvedAddress[]> {
    const key = `${url.protocol}//${bareHost(url).toLowerCase()}`;
    const now = Date.now();
    const cached = this.dns.get(key);
    if (cached && cached.until > now) return cached.addresses;
    const addresses = await resolveTarget(url, this.opts.policy, this.resolver);
    if (this.dns.size > 10_000) this.dns.clear();
    this.dns.set(key, { until: now + DNS_CACHE_MS, addresses });
    return addresses;
  }

  async send(endpointId: string, req: WebhookRequest): Promise<AttemptResult> {
    let url: URL;
    let target: ResolvedAddress;
    try {
      // The URL rules again (the config may have changed since the endpoint was added), then every address.
      url = parseTargetUrl(req.url, this.opts.policy);
      [target] = await this.resolve(url);
    } catch (err) {
      const refused = err instanceof TargetError;
      return { ok: false, status: null, error: refused ? `target refused: ${err.message}` : `invalid target: ${(err as Error).message}`, retryAfterMs: null, refused };
    }
    const headers = {
      'content-type': 'application/json',
      'content-length': String(req.body.length),
      'user-agent': USER_AGENT,
      'x-service-event': req.type,
      'x-service-delivery': req.deliveryId,
      'x-service-signature': signatureHeader(req.body, req.timestamp, req.secrets),
    };
    const deadline = Date.now() + this.opts.timeoutMs;
    const first = await this.post(endpointId, url, target, headers, req.body, deadline);
    // A keep-alive socket the server closed while idle: Node's advice is to retry once on a new one.
    if (first.staleSocket && Date.now() < deadline) return (await this.post(endpointId, url, target, headers, req.body, deadline)).result;
    return first.result;
  }

  private post(
    endpointId: string,
    url: URL,
    target: ResolvedAddress,
    headers: Record<string, string>,
    body: Buffer,
    deadline: number,
  ): Promise<{ result: AttemptResult; staleSocket: boolean }> {
    const isHttps = url.protocol === 'https:';
    const request = isHttps ? https.request : http.request;
    return new Promise((resolve) => {
      let settled = false;
      const settle = (result: AttemptResult, staleSocket = false) => {
        if (settled) return;
        settled = true;
        resolve({ result, staleSocket });
      };
      /** What the receiver has answered so far: read up to ANSWER_CHARS, then drained. */
      let answer = '';
      const answered = () => (answer === '' ? null : answer.replace(/\0/g, ''));
      /** A 2xx arrived: delivered, whatever happens to the rest of its body. */
      let deliveredStatus: number | null = null;
      const fail = (error: string, status: number | null = null, retryAfterMs: number | null = null) => settle({ ok: false, status, error, retryAfterMs, refused: false, answer: answered() });
      const delivered = () => settle({ ok: true, status: deliveredStatus, error: null, retryAfterMs: null, refused: false, answer: answered() });
      const req = request({
        protocol: url.protocol,
        hostname: bareHost(url),
        port: url.port || (isHttps ? 443 : 80),
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers,
        agent: this.agentFor(endpointId, url),
        lookup: pinnedLookup(target) as unknown as typeof import('node:dns').lookup,
        // Node 20's default family selection would call lookup with all: true; handled too.
      });
      // The deadline counts only time this thread could watch: a loop that stalled (a starved
      // SCHED_IDLE thread on a saturated machine, a long GC pause) gets the stalled time back,
      // up to a bound, and the verdict waits one turn of the event loop (timers run before I/O
      // is polled), so an answer that arrived meanwhile is read first, not timed out.
      let exchangeOver = false;
      const stalledAtStart = this.stalls.acquire();
      let granted = 0;
      let timer: NodeJS.Timeout;
      const endExchange = () => {
        if (exchangeOver) return;
        exchangeOver = true;
        clearTimeout(timer);
        this.stalls.release();
      };
      const arm = (ms: number) => {
        timer = setTimeout(
          () =>
            setImmediate(() => {
              if (exchangeOver) return;
              const owed = Math.min(this.stalls.sample() - stalledAtStart - granted, MAX_STALL_GRACE_FACTOR * this.opts.timeoutMs - granted);
              if (owed > 0) {
                granted += owed;
                return arm(owed);
              }
              endExchange();
              if (deliveredStatus !== null) delivered();
              else fail(`timeout: no 2xx within ${this.opts.timeoutMs} ms`);
              req.destroy(new Error('timeout'));
            }),
          ms,
        );
        timer.unref();
      };
      arm(Math.max(0, deadline - Date.now()));
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (answer.length < ANSWER_CHARS) answer += chunk.slice(0, ANSWER_CHARS - answer.length);
        });
        if (status >= 200 && status < 300) {
          // Delivered. The body is read (its start kept for the log) and drained within the
          // deadline, so the socket is reused; past the deadline it is still delivered.
          deliveredStatus = status;
          res.on('end', () => {
            endExchange();
            delivered();
          });
          res.on('error', () => {
            endExchange();
            delivered();
          });
          return;
        }
        const retryAfter = status === 429 || status === 503 ? parseRetryAfter(res.headers['retry-after'], this.opts.now()) : null;
        res.on('end', () => {
          endExchange();
          const text = printable(answer.slice(0, ERROR_BODY_BYTES));
          if (status >= 300 && status < 400) {
            const location = res.headers.location ? `; Location: ${printable(res.headers.location)}` : '';
            fail(`HTTP ${status}: redirects are not followed${location}`, status);
          } else {
            fail(`HTTP ${status}${text ? `: ${text}` : ''}`, status, retryAfter);
          }
        });
        res.on('error', () => fail(`HTTP ${status} (response cut off)`, status, retryAfter));
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        endExchange();
        if (deliveredStatus !== null) return delivered();
        const stale = req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE');
        if (stale && !settled) {
          settled = true;
          resolve({ result: { ok: false, status: null, error: `connection reset (${err.code})`, retryAfterMs: null, refused: false }, staleSocket: true });
          return;
        }
        fail(`${err.code ? `${err.code}: ` : ''}${err.message}`);
      });
      req.end(body);
    });
  }
}
