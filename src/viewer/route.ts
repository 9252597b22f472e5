/**
 * The public viewer on the send API listeners: `GET /view/{m.id}/{token}` (the page) and
 * `GET /view/{m.id}/{token}/body` (the message body, framed by the page). No account: the
 * signed token is the permission. Unknown, forged and expired links get one identical 404.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { messageContent } from '../operator/messageContent.js';
import { SlidingWindowLimiter } from '../policy/rateLimiter.js';
import type { Db } from '../store/db.js';
import { getMessage } from '../store/messages.js';
import { sendBodyDocument } from './bodyDocument.js';
import { viewerTokenValid } from './links.js';
import { NOT_FOUND_PAGE, PAGE_POLICY, viewerPage } from './page.js';

export interface ViewerDeps {
  db: Db;
  clock: Clock;
  config: PosternConfig;
  logger: Logger;
  spoolRoot: string;
  secret: Buffer;
}

type Request = IncomingMessage & { params?: Record<string, string> };

const COMMON_HEADERS = { 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store', 'X-Robots-Tag': 'noindex' };

function sendPage(res: ServerResponse, status: number, html: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...COMMON_HEADERS, 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(html), 'Content-Security-Policy': PAGE_POLICY, ...extra });
  res.end(html);
}

/** One viewer for every HTTP listener: one per-IP window for all of them. */
export class Viewer {
  private readonly perIp: SlidingWindowLimiter;

  constructor(private readonly deps: ViewerDeps) {
    this.perIp = new SlidingWindowLimiter(deps.config.rate_limits.viewer_per_ip, deps.config.rate_limits.window_seconds * 1000, deps.clock);
  }

  readonly page = (req: Request, res: ServerResponse): void => void this.serve(req, res, false);
  readonly body = (req: Request, res: ServerResponse): void => void this.serve(req, res, true);

  private async serve(req: Request, res: ServerResponse, body: boolean): Promise<void> {
    try {
      const wait = this.perIp.take(req.socket.remoteAddress ?? 'unknown');
      if (wait > 0) {
        const seconds = Math.max(1, Math.ceil(wait / 1000));
        return sendPage(res, 429, '<!DOCTYPE html><title>Too many requests</title><h1>Too many requests</h1>', { 'Retry-After': String(seconds) });
      }
      const id = req.params?.id ?? '';
      const token = req.params?.token ?? '';
      const { db, clock, config, spoolRoot, secret } = this.deps;
      const m = viewerTokenValid(secret, id, token, clock.now()) ? getMessage(db, id) : undefined;
      if (!m) return sendPage(res, 404, NOT_FOUND_PAGE);
      // A message whose file is gone (retention, a deleted capture) is as unknown as any other.
      const content = await messageContent({ db, clock, config, spoolRoot }, id).catch(() => null);
      if (!content) return sendPage(res, 404, NOT_FOUND_PAGE);
      const remoteImages = new URL(req.url ?? '/', 'http://viewer').searchParams.get('images') === '1';
      if (body) return sendBodyDocument(res, content, remoteImages);
      const recipients = JSON.parse(m.recipients) as { to: string[]; cc: string[] };
      const html = viewerPage(
        {
          subject: m.subject,
          from: m.from_email,
          to: recipients.to,
          cc: recipients.cc,
          createdAt: new Date(m.created_at).toISOString(),
          status: m.status,
          attachments: content.attachments.filter((a) => a.disposition === 'attachment'),
        },
        `${token}/body${remoteImages ? '?images=1' : ''}`,
        remoteImages,
      );
      sendPage(res, 200, html);
    } catch (err) {
      this.deps.logger.error({ err }, 'viewer request failed');
      if (!res.headersSent) sendPage(res, 500, '<!DOCTYPE html><title>Error</title><h1>Something went wrong</h1>');
      else res.destroy();
    }
  }
}
