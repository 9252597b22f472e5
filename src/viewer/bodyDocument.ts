/** A message's body as a document kept inert wherever it is framed (CSP sandbox: no scripts, forms or remote fetches unless asked). */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AttachmentInfo } from '../operator/messageContent.js';

export function bodyPolicy(remoteImages: boolean): string {
  return [
    "default-src 'none'",
    "style-src 'unsafe-inline' data:",
    // 'self': the message's inline parts, rewritten to this origin (withInlineParts).
    `img-src data: 'self'${remoteImages ? ' http: https:' : ''}`,
    'font-src data:',
    "base-uri 'none'",
    "form-action 'none'",
    'sandbox allow-popups allow-popups-to-escape-sandbox',
    "frame-ancestors 'self'",
  ].join('; ');
}

const escapes: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => escapes[c]);

export type InlinePart = Pick<AttachmentInfo, 'index'> & { content_id: string };

export const inlinePartsOf = (attachments: readonly AttachmentInfo[]): InlinePart[] =>
  attachments.flatMap((a) => (a.content_id ? [{ index: a.index, content_id: a.content_id }] : []));

const CID_REFERENCE = /(=\s*["']?|url\(\s*["']?)cid:([^"'\s)>]+)/gi;

function decoded(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** RFC 2392; a reference to no part is left as it is and loads nothing. `partUrl` must give a URL with no quote, space or `>`. */
export function withInlineParts(
  html: string,
  parts: readonly InlinePart[],
  partUrl: (index: number) => string,
): string {
  if (parts.length === 0) return html;
  const exact = new Map(parts.map((p) => [p.content_id, p.index]));
  const folded = new Map(parts.map((p) => [p.content_id.toLowerCase(), p.index]));
  return html.replace(CID_REFERENCE, (whole, before: string, reference: string) => {
    const id = decoded(reference);
    const index = exact.get(id) ?? folded.get(id.toLowerCase());
    return index === undefined ? whole : `${before}${partUrl(index)}`;
  });
}

function textDocument(text: string): string {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre style="white-space:pre-wrap;font:14px/1.5 ui-monospace,monospace;margin:12px">${escapeHtml(text)}</pre></body></html>`;
}

export function sendBodyDocument(
  res: ServerResponse,
  content: { html: string | null; text: string | null },
  remoteImages: boolean,
  inline: { parts: readonly InlinePart[]; partUrl: (index: number) => string } = {
    parts: [],
    partUrl: String,
  },
): void {
  const body =
    content.html !== null
      ? withInlineParts(content.html, inline.parts, inline.partUrl)
      : textDocument(content.text ?? '');
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

/** Never a header injection, never sniffed. */
export const safeContentType = (type: string): string =>
  /^[\w.+-]+\/[\w.+-]+$/.test(type) ? type : 'application/octet-stream';

/** Its own content type, never sniffed, a download if opened alone, and inert whatever it holds. */
export async function sendInlinePart(
  res: ServerResponse,
  part: AttachmentInfo,
  stream: Readable,
): Promise<void> {
  res.writeHead(200, {
    'Content-Type': safeContentType(part.content_type),
    'Content-Disposition': 'attachment',
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': "default-src 'none'; sandbox",
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
  });
  await pipeline(stream, res);
}
