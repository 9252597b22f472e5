/**
 * The public viewer on the send API listeners: `GET /view/{m.id}/{token}` (the page),
 * `GET /view/{m.id}/{token}/body` (the message body, framed by the page) and
 * `GET /view/{m.id}/{token}/inline/{index}` (an inline image the body names as `cid:`). No
 * account: the signed token is the permission (operator/messageLinks.ts). Unknown, forged and
 * expired links get one identical 404.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import type { OperatorContext } from '../operator/context.js';
import { viewedInlinePart, viewedMessage } from '../operator/messageLinks.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import type { RateWindow } from '../policy/rateWindow.js';
import type { RateWindowFactory } from '../policy/rateWindowFactory.js';
import { sendBodyDocument, sendInlinePart } from './bodyDocument.js';
import { NOT_FOUND_PAGE, PAGE_POLICY, viewerPage } from './page.js';

export interface ViewerDeps {
  /** Reads messages and their files (the operator layer's context; the viewer writes nothing). */
  ctx: OperatorContext;
  rateLimits: Pick<PosternConfig['rate_limits'], 'viewer_per_ip' | 'window_seconds'>;
  /** Makes the per-IP window: this node's memory on SQLite, the cluster's on PostgreSQL. */
  windows: RateWindowFactory;
  logger: Logger;
  secret: Buffer;
  /** `http.trusted_proxies`: the per-IP window counts the client behind them. */
  proxies: TrustedProxies;
}

type Request = IncomingMessage & { params?: Record<string, string> };

const COMMON_HEADERS = { 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store', 'X-Robots-Tag': 'noindex' };

function sendPage(res: ServerResponse, status: number, html: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...COMMON_HEADERS, 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(html), 'Content-Security-Policy': PAGE_POLICY, ...extra });
  res.end(html);
}

/**
 * One viewer for every HTTP listener: one per-IP window for all of them (`viewer_ip`; on
 * PostgreSQL every node's requests count in it together).
 */
export class Viewer {
  private perIp: RateWindow;

  constructor(private readonly deps: ViewerDeps) {
    this.perIp = this.window(deps.rateLimits);
  }

  /** New rate limits (SIGHUP): the window starts afresh under them, as the send API's do. */
  updateRateLimits(limits: ViewerDeps['rateLimits']): void {
    this.perIp = this.window(limits);
  }

  private window(limits: ViewerDeps['rateLimits']): RateWindow {
    return this.deps.windows.window('viewer_ip', limits.viewer_per_ip, limits.window_seconds * 1000);
  }

  readonly page = (req: Request, res: ServerResponse): void => void this.serve(req, res, 'page');
  readonly body = (req: Request, res: ServerResponse): void => void this.serve(req, res, 'body');
  /** Every inline image counts in the per-address window too: each one is a read of the message. */
  readonly inline = (req: Request, res: ServerResponse): void => void this.serve(req, res, 'inline');

  private async serve(req: Request, res: ServerResponse, what: 'page' | 'body' | 'inline'): Promise<void> {
    try {
      // In memory the answer comes at once; a shared window's is a promise (a failure: the 500 below).
      const taken = this.perIp.take(this.deps.proxies.clientAddress(req));
      const wait = typeof taken === 'number' ? taken : await taken;
      if (wait > 0) {
        const seconds = Math.max(1, Math.ceil(wait / 1000));
        return sendPage(res, 429, '<!DOCTYPE html><title>Too many requests</title><h1>Too many requests</h1>', { 'Retry-After': String(seconds) });
      }
      const token = req.params?.token ?? '';
      if (what === 'inline') {
        const index = /^\d{1,4}$/.test(req.params?.index ?? '') ? Number(req.params!.index) : -1;
        const part = index < 0 ? null : await viewedInlinePart(this.deps.ctx, this.deps.secret, req.params?.id ?? '', token, index);
        if (!part) return sendPage(res, 404, NOT_FOUND_PAGE);
        return await sendInlinePart(res, part.attachment, part.stream);
      }
      const m = await viewedMessage(this.deps.ctx, this.deps.secret, req.params?.id ?? '', token);
      if (!m) return sendPage(res, 404, NOT_FOUND_PAGE);
      const remoteImages = new URL(req.url ?? '/', 'http://viewer').searchParams.get('images') === '1';
      // Relative to /view/{id}/{token}/body: /view/{id}/{token}/inline/{index}.
      if (what === 'body') return sendBodyDocument(res, m, remoteImages, { parts: m.inline_parts, partUrl: (index) => `inline/${index}` });
      // Relative: the page is /view/{id}/{token}, its body /view/{id}/{token}/body (behind a proxy's prefix too).
      sendPage(res, 200, viewerPage(m, `${token}/body${remoteImages ? '?images=1' : ''}`, remoteImages));
    } catch (err) {
      this.deps.logger.error({ err }, 'viewer request failed');
      if (!res.headersSent) sendPage(res, 500, '<!DOCTYPE html><title>Error</title><h1>Something went wrong</h1>');
      else res.destroy();
    }
  }
}
