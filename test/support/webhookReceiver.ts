import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { HANG_GUARD_MS } from './waiting.js';

/** Arrivals across every receiver of this process, counted: the order of requests to different receivers. */
let arrivals = 0;

/** One request as the receiver saw it: the raw body bytes, exactly as they arrived. */
export interface ReceivedWebhook {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /** The body parsed as JSON (undefined when it is not JSON). */
  body: any;
  /** Wall-clock arrival (Date.now()). */
  at: number;
  /** Its place in the order of arrival over every receiver of this process (1, 2, …). */
  arrival: number;
}

export interface ReceiverAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering (a slow endpoint). */
  delayMs?: number;
  /** Answer only once this settles (an endpoint that holds its answer until the test lets it go). */
  until?: Promise<unknown>;
}

/**
 * A real HTTP(S) webhook receiver on 127.0.0.1 (ephemeral port). It records every request and
 * answers with `respond` (default 200), which sees the request and how many requests for the
 * same path came before it.
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  respond: (req: ReceivedWebhook, previousOnPath: number) => ReceiverAnswer = () => ({
    status: 200,
  });
  /** Requests being answered right now, overall and the most ever seen at once, per path. */
  readonly inFlight = new Map<string, number>();
  readonly maxInFlight = new Map<string, number>();
  private readonly waiters: { check: () => boolean; resolve: () => void }[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();

  private constructor(
    private readonly server: http.Server,
    readonly port: number,
    readonly scheme: 'http' | 'https',
  ) {}

  static async start(opts: { tls?: { key: string; cert: string } } = {}): Promise<WebhookReceiver> {
    let self: WebhookReceiver | null = null;
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => self!.handle(req, Buffer.concat(chunks), res));
    };
    const server = opts.tls
      ? https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, handler)
      : http.createServer(handler);
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    self = new WebhookReceiver(
      server,
      (server.address() as AddressInfo).port,
      opts.tls ? 'https' : 'http',
    );
    return self;
  }

  /** `http://127.0.0.1:<port><path>` (or https, or another host name for DNS tests). */
  url(path = '/hook', host = '127.0.0.1'): string {
    return `${this.scheme}://${host}:${this.port}${path}`;
  }

  private handle(req: http.IncomingMessage, raw: Buffer, res: http.ServerResponse): void {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      body = undefined;
    }
    const path = req.url ?? '/';
    const item: ReceivedWebhook = {
      method: req.method ?? '',
      path,
      headers: req.headers,
      raw,
      body,
      at: Date.now(),
      arrival: ++arrivals,
    };
    const previous = this.received.filter((r) => r.path === path).length;
    this.received.push(item);
    const now = (this.inFlight.get(path) ?? 0) + 1;
    this.inFlight.set(path, now);
    this.maxInFlight.set(path, Math.max(this.maxInFlight.get(path) ?? 0, now));
    this.notify();
    const answer = this.respond(item, previous);
    const send = () => {
      this.inFlight.set(path, (this.inFlight.get(path) ?? 1) - 1);
      if (res.destroyed) return;
      res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
      res.end(answer.body ?? '');
    };
    if (answer.until) {
      void answer.until.then(send, send);
    } else if (answer.delayMs) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        send();
      }, answer.delayMs);
      this.timers.add(timer);
    } else {
      send();
    }
  }

  /** Requests received on `path` (all paths when omitted). */
  on(path?: string): ReceivedWebhook[] {
    return path === undefined ? this.received : this.received.filter((r) => r.path === path);
  }

  /** Resolves once `check()` holds (re-checked at every request), or rejects after `timeoutMs` (a hang guard). */
  waitUntil(check: () => boolean, timeoutMs = HANG_GUARD_MS, what = 'the receiver'): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${what} (${this.received.length} requests so far)`,
          ),
        );
      }, timeoutMs);
      // The receiver's server keeps the process alive while it waits; a test that ended does not wait for the guard.
      timer.unref();
      const waiter = {
        check,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** Waits for at least `n` requests on `path` (all paths when omitted). */
  waitFor(n: number, path?: string, timeoutMs = HANG_GUARD_MS): Promise<ReceivedWebhook[]> {
    return this.waitUntil(
      () => this.on(path).length >= n,
      timeoutMs,
      `${n} requests${path ? ` on ${path}` : ''}`,
    ).then(() => this.on(path));
  }

  private notify(): void {
    for (const w of [...this.waiters]) {
      if (!w.check()) continue;
      this.waiters.splice(this.waiters.indexOf(w), 1);
      w.resolve();
    }
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }
}
