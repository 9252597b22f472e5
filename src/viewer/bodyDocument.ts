/**
 * A message's HTML (or its text) as a document of its own, served with a policy that keeps it
 * inert wherever it is framed: no scripts (CSP `sandbox` without `allow-scripts`, so an opaque
 * origin too), no plugins, no forms, nothing fetched from the network unless remote images are
 * asked for. The console preview and the public viewer both serve it this way.
 */
import type { ServerResponse } from 'node:http';

export function bodyPolicy(remoteImages: boolean): string {
  return [
    "default-src 'none'",
    "style-src 'unsafe-inline' data:",
    `img-src data:${remoteImages ? ' http: https:' : ''}`,
    'font-src data:',
    "base-uri 'none'",
    "form-action 'none'",
    'sandbox allow-popups allow-popups-to-escape-sandbox',
    "frame-ancestors 'self'",
  ].join('; ');
}

const escapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => escapes[c]);

/** The text body as a document: escaped, wrapped as written. */
function textDocument(text: string): string {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre style="white-space:pre-wrap;font:14px/1.5 ui-monospace,monospace;margin:12px">${escapeHtml(text)}</pre></body></html>`;
}

/** Writes the body document (HTML if the message has one, else its text) with its policy. */
export function sendBodyDocument(res: ServerResponse, content: { html: string | null; text: string | null }, remoteImages: boolean): void {
  const body = content.html ?? textDocument(content.text ?? '');
  res.writeHead(200, {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Content-Security-Policy': bodyPolicy(remoteImages),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
  });
  res.end(body);
}
