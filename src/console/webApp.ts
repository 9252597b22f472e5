/**
 * The web console's files (built by Vite into dist/web), served by the console listener at `/`
 * with the console's security headers: a CSP that allows only the console's own scripts and
 * styles (no inline script), never framed, no referrer, no sniffing. The files are read once
 * at start (a few hundred KB); `index.html` is told where the send API listens.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/src/console/ → dist/web/ */
export const WEB_ROOT = fileURLToPath(new URL('../../web/', import.meta.url));

export const CONSOLE_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "frame-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** For API answers: nothing in them may load or run anything. */
export const API_POLICY = "default-src 'none'; frame-ancestors 'none'";

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
};

interface WebFile {
  type: string;
  body: Buffer;
  /** Hashed names never change: cached for a year. */
  immutable: boolean;
}

function filesBelow(dir: string, prefix = ''): [string, string][] {
  const out: [string, string][] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesBelow(full, `${prefix}${entry.name}/`));
    else out.push([`/${prefix}${entry.name}`, full]);
  }
  return out;
}

export class WebApp {
  private readonly files = new Map<string, WebFile>();
  private readonly indexTemplate: string | null;

  /** `doors`: the send API's addresses for the empty states' examples (known once listeners are bound). */
  constructor(
    private readonly doors: () => { production: string | null; sandbox: string | null },
    root = WEB_ROOT,
  ) {
    let index: string | null = null;
    try {
      if (statSync(root).isDirectory()) {
        for (const [urlPath, file] of filesBelow(root)) {
          const body = readFileSync(file);
          if (urlPath === '/index.html') index = body.toString('utf8');
          else
            this.files.set(urlPath, {
              type: TYPES[path.extname(file)] ?? 'application/octet-stream',
              body,
              immutable: urlPath.startsWith('/assets/'),
            });
        }
      }
    } catch {
      index = null;
    }
    this.indexTemplate = index;
  }

  /** Serves a GET/HEAD for the app's files; false when the path is not one of them. */
  serve(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const urlPath = (req.url ?? '/').split('?')[0];
    if (urlPath === '/' || urlPath === '/index.html') {
      if (this.indexTemplate === null) {
        this.send(
          req,
          res,
          503,
          'text/plain; charset=utf-8',
          Buffer.from(
            'The web console is not built: run `npm run build` in the Postern directory.\n',
          ),
          false,
        );
        return true;
      }
      const doors = JSON.stringify(this.doors())
        .replace(/&/g, '&amp;')
        .replace(/"/g, '&quot;')
        .replace(/</g, '&lt;');
      const html = this.indexTemplate.replace(
        '<meta name="postern-doors" content="" />',
        `<meta name="postern-doors" content="${doors}" />`,
      );
      this.send(req, res, 200, TYPES['.html'], Buffer.from(html), false);
      return true;
    }
    const file = this.files.get(urlPath);
    if (!file) return false;
    this.send(req, res, 200, file.type, file.body, file.immutable);
    return true;
  }

  private send(
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    type: string,
    body: Buffer,
    immutable: boolean,
  ): void {
    res.writeHead(status, {
      'Content-Type': type,
      'Content-Length': body.length,
      'Cache-Control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      'Content-Security-Policy': CONSOLE_POLICY,
      'X-Frame-Options': 'DENY',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  }
}
