import http from 'node:http';
import https from 'node:https';
import { signatureHeader } from './signing.js';
import { StallClock } from './stallClock.js';
import {
  bareHost,
  parseTargetUrl,
  pinnedLookup,
  type ResolvedAddress,
  type Resolver,
  resolveTarget,
  systemResolver,
  TargetError,
  type TargetPolicy,
} from './targets.js';

export const USER_AGENT = 'Postern-Webhooks/1.0';

export interface WebhookRequest {
  url: string;
  deliveryId: string;
  type: string;
  /** Signed and sent as they are. */
  body: Buffer;
  /** Current secret first, then a previous one still in its grace period. */
  secrets: readonly string[];
  timestamp: number;
}

export interface AttemptResult {
  ok: boolean;
  status: number | null;
  error: string | null;
  retryAfterMs: number | null;
  /** Refused before any connection (address or scheme rules). */
  refused: boolean;
  /** The start of the receiver's answer, for the delivery log; null when none came. */
  answer?: string | null;
}

export interface SenderOptions {
  timeoutMs: number;
  policy: TargetPolicy;
  maxSocketsPerEndpoint: number;
  resolver?: Resolver;
  ca?: string | Buffer;
  now(): number;
}

const DNS_CACHE_MS = 30_000;
/** Closed before a typical server's 5 s keep-alive timeout. */
const IDLE_SOCKET_MS = 4_000;
const ERROR_BODY_BYTES = 200;
export const ANSWER_CHARS = 1024;
/** A stalled thread gets back at most this many timeouts' worth of time it could not watch. */
const MAX_STALL_GRACE_FACTOR = 4;

export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now) : null;
}

const printable = (s: string) => s.replace(/\p{Cc}+/gu, ' ').trim();

/** Signed POSTs: a keep-alive agent per endpoint, addresses checked before every attempt and the socket pinned to them, no redirects. */
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
    const common = {
      keepAlive: true,
      maxSockets: this.opts.maxSocketsPerEndpoint,
      maxFreeSockets: this.opts.maxSocketsPerEndpoint,
      timeout: IDLE_SOCKET_MS,
      scheduling: 'lifo' as const,
    };
    const agent =
      url.protocol === 'https:'
        ? new https.Agent({ ...common, ca: this.opts.ca })
        : new http.Agent(common);
    this.agents.set(endpointId, { agent, url: url.origin });
    return agent;
  }

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

  /** A refusal is never cached, so a fixed DNS record takes effect at the next attempt. */
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
      // The URL rules again: the config may have changed since the endpoint was added.
      url = parseTargetUrl(req.url, this.opts.policy);
      [target] = await this.resolve(url);
    } catch (err) {
      const refused = err instanceof TargetError;
      return {
        ok: false,
        status: null,
        error: refused
          ? `target refused: ${err.message}`
          : `invalid target: ${(err as Error).message}`,
        retryAfterMs: null,
        refused,
      };
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
    if (first.staleSocket && Date.now() < deadline)
      return (await this.post(endpointId, url, target, headers, req.body, deadline)).result;
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
      let answer = '';
      const answered = () => (answer === '' ? null : answer.replace(/\0/g, ''));
      let deliveredStatus: number | null = null;
      const fail = (
        error: string,
        status: number | null = null,
        retryAfterMs: number | null = null,
      ) => settle({ ok: false, status, error, retryAfterMs, refused: false, answer: answered() });
      const delivered = () =>
        settle({
          ok: true,
          status: deliveredStatus,
          error: null,
          retryAfterMs: null,
          refused: false,
          answer: answered(),
        });
      const req = request({
        protocol: url.protocol,
        hostname: bareHost(url),
        port: url.port || (isHttps ? 443 : 80),
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers,
        agent: this.agentFor(endpointId, url),
        lookup: pinnedLookup(target) as unknown as typeof import('node:dns').lookup,
        // Node 20's default family selection calls lookup with all: true.
      });
      // The deadline counts only time this thread could watch (docs/architecture.md#webhooks), and the verdict
      // waits one turn of the event loop so an answer that arrived meanwhile is read first.
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
              const owed = Math.min(
                this.stalls.sample() - stalledAtStart - granted,
                MAX_STALL_GRACE_FACTOR * this.opts.timeoutMs - granted,
              );
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
          // Delivered; the body is drained within the deadline so the socket is reused.
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
        const retryAfter =
          status === 429 || status === 503
            ? parseRetryAfter(res.headers['retry-after'], this.opts.now())
            : null;
        res.on('end', () => {
          endExchange();
          const text = printable(answer.slice(0, ERROR_BODY_BYTES));
          if (status >= 300 && status < 400) {
            const location = res.headers.location
              ? `; Location: ${printable(res.headers.location)}`
              : '';
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
          resolve({
            result: {
              ok: false,
              status: null,
              error: `connection reset (${err.code})`,
              retryAfterMs: null,
              refused: false,
            },
            staleSocket: true,
          });
          return;
        }
        fail(`${err.code ? `${err.code}: ` : ''}${err.message}`);
      });
      req.end(body);
    });
  }
}
