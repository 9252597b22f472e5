/**
 * A message's HTML (or its text) as a document of its own, served with a policy that keeps it
 * inert wherever it is framed: no scripts (CSP `sandbox` without `allow-scripts`, so an opaque
 * origin too), no plugins, no forms, nothing fetched from the network unless remote images are
 * asked for. The console preview and the public viewer both serve it this way. The message's own
 * inline images (`cid:` references) are served from its parts on the same origin, so they show
 * while remote images stay blocked.
 */
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

const escapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => escapes[c]);

/** A part of the message its HTML can name as `cid:<content id>`. */
export type InlinePart = Pick<AttachmentInfo, 'index'> & { content_id: string };

/** The parts of a message that have a Content-ID (inline images, mostly). */
export const inlinePartsOf = (attachments: readonly AttachmentInfo[]): InlinePart[] =>
  attachments.flatMap((a) => (a.content_id ? [{ index: a.index, content_id: a.content_id }] : []));

/** A `cid:` reference in an attribute value (`src=`, `background=`) or a CSS `url(…)`. */
const CID_REFERENCE = /(=\s*["']?|url\(\s*["']?)cid:([^"'\s)>]+)/gi;

function decoded(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * The HTML with each `cid:` reference to one of the message's own parts replaced by
 * `partUrl(index)` (RFC 2392: the URL is the part's Content-ID, percent-encoded; compared as
 * written, then ignoring case). A reference to no part of the message is left as it is, and
 * loads nothing. `partUrl` must give a URL with no quote, space or `>`.
 */
export function withInlineParts(html: string, parts: readonly InlinePart[], partUrl: (index: number) => string): string {
  if (parts.length === 0) return html;
  const exact = new Map(parts.map((p) => [p.content_id, p.index]));
  const folded = new Map(parts.map((p) => [p.content_id.toLowerCase(), p.index]));
  return html.replace(CID_REFERENCE, (whole, before: string, reference: string) => {
    const id = decoded(reference);
    const index = exact.get(id) ?? folded.get(id.toLowerCase());
    return index === undefined ? whole : `${before}${partUrl(index)}`;
  });
}

/** The text body as a document: escaped, wrapped as written. */
function textDocument(text: string): string {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre style="white-space:pre-wrap;font:14px/1.5 ui-monospace,monospace;margin:12px">${escapeHtml(text)}</pre></body></html>`;
}

/**
 * Writes the body document (HTML if the message has one, else its text) with its policy; the
 * HTML's `cid:` references to `parts` point at `partUrl(index)`.
 */
export function sendBodyDocument(
  res: ServerResponse,
  content: { html: string | null; text: string | null },
  remoteImages: boolean,
  inline: { parts: readonly InlinePart[]; partUrl: (index: number) => string } = { parts: [], partUrl: String },
): void {
  const body = content.html !== null ? withInlineParts(content.html, inline.parts, inline.partUrl) : textDocument(content.text ?? '');
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

/** A plain `type/subtype` content type, else application/octet-stream (never a header injection, never sniffed). */
export const safeContentType = (type: string): string => (/^[\w.+-]+\/[\w.+-]+$/.test(type) ? type : 'application/octet-stream');

/**
 * One inline part's bytes, for an `<img>` of the body document: its own content type, never
 * sniffed, a download if opened by itself, and inert (CSP sandbox) whatever it holds.
 */
export async function sendInlinePart(res: ServerResponse, part: AttachmentInfo, stream: Readable): Promise<void> {
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
