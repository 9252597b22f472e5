/** The public viewer (docs/console.md#the-public-viewer): the signed token is the permission; bad links all get one identical 404. */
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
  /** The viewer writes nothing. */
  ctx: OperatorContext;
  rateLimits: Pick<PosternConfig['rate_limits'], 'viewer_per_ip' | 'window_seconds'>;
  windows: RateWindowFactory;
  logger: Logger;
  secret: Buffer;
  proxies: TrustedProxies;
}

type Request = IncomingMessage & { params?: Record<string, string> };

const COMMON_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Robots-Tag': 'noindex',
};

function sendPage(
  res: ServerResponse,
  status: number,
  html: string,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...COMMON_HEADERS,
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': Buffer.byteLength(html),
    'Content-Security-Policy': PAGE_POLICY,
    ...extra,
  });
  res.end(html);
}

/** One per-IP window for every listener (on PostgreSQL, every node's). */
export class Viewer {
  private perIp: RateWindow;

  constructor(private readonly deps: ViewerDeps) {
    this.perIp = this.window(deps.rateLimits);
  }

  updateRateLimits(limits: ViewerDeps['rateLimits']): void {
    this.perIp = this.window(limits);
  }

  private window(limits: ViewerDeps['rateLimits']): RateWindow {
    return this.deps.windows.window(
      'viewer_ip',
      limits.viewer_per_ip,
      limits.window_seconds * 1000,
    );
  }

  readonly page = (req: Request, res: ServerResponse): void => void this.serve(req, res, 'page');
  readonly body = (req: Request, res: ServerResponse): void => void this.serve(req, res, 'body');
  /** Each inline image is a read of the message: it counts in the window too. */
  readonly inline = (req: Request, res: ServerResponse): void =>
    void this.serve(req, res, 'inline');

  private async serve(
    req: Request,
    res: ServerResponse,
    what: 'page' | 'body' | 'inline',
  ): Promise<void> {
    try {
      const taken = this.perIp.take(this.deps.proxies.clientAddress(req));
      const wait = typeof taken === 'number' ? taken : await taken;
      if (wait > 0) {
        const seconds = Math.max(1, Math.ceil(wait / 1000));
        return sendPage(
          res,
          429,
          '<!DOCTYPE html><title>Too many requests</title><h1>Too many requests</h1>',
          { 'Retry-After': String(seconds) },
        );
      }
      const token = req.params?.token ?? '';
      if (what === 'inline') {
        const index = /^\d{1,4}$/.test(req.params?.index ?? '') ? Number(req.params!.index) : -1;
        const part =
          index < 0
            ? null
            : await viewedInlinePart(
                this.deps.ctx,
                this.deps.secret,
                req.params?.id ?? '',
                token,
                index,
              );
        if (!part) return sendPage(res, 404, NOT_FOUND_PAGE);
        return await sendInlinePart(res, part.attachment, part.stream);
      }
      const m = await viewedMessage(this.deps.ctx, this.deps.secret, req.params?.id ?? '', token);
      if (!m) return sendPage(res, 404, NOT_FOUND_PAGE);
      const remoteImages =
        new URL(req.url ?? '/', 'http://viewer').searchParams.get('images') === '1';
      if (what === 'body')
        return sendBodyDocument(res, m, remoteImages, {
          parts: m.inline_parts,
          partUrl: (index) => `inline/${index}`,
        });
      // Relative, so it works behind a proxy's prefix too.
      sendPage(
        res,
        200,
        viewerPage(m, `${token}/body${remoteImages ? '?images=1' : ''}`, remoteImages),
      );
    } catch (err) {
      this.deps.logger.error({ err }, 'viewer request failed');
      if (!res.headersSent)
        sendPage(res, 500, '<!DOCTYPE html><title>Error</title><h1>Something went wrong</h1>');
      else res.destroy();
    }
  }
}
