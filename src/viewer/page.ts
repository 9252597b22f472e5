import { createHash } from 'node:crypto';
import type { ViewedMessage } from '../operator/messageLinks.js';
import { escapeHtml } from './bodyDocument.js';

const STYLE = `
*{box-sizing:border-box}body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;background:#f4f5f7}
main{max-width:960px;margin:0 auto;padding:16px}h1{font-size:20px;margin:0 0 12px;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px;margin:0 0 12px;background:#fff;padding:12px;border:1px solid #d8dce1;border-radius:6px}
dt{color:#57606a}dd{margin:0;overflow-wrap:anywhere}.status{display:inline-block;padding:0 8px;border-radius:10px;background:#e8eaed;font-size:13px}
iframe{width:100%;height:70vh;border:1px solid #d8dce1;border-radius:6px;background:#fff}ul{margin:4px 0 0;padding-left:20px}
.note{font-size:13px;color:#57606a;margin:8px 0}a{color:#0b5cad}`;
const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

/** The viewer page's own policy: its one stylesheet (by hash), the body frame from this origin, nothing else. */
export const PAGE_POLICY = [
  "default-src 'none'",
  `style-src ${STYLE_HASH}`,
  "frame-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const list = (emails: string[]) => escapeHtml(emails.join(', '));

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * Where the message stands, in the words of someone who was sent it (not the index's: a
 * recipient does not know "captured" or "queued"). A sandbox capture was never sent.
 */
export function recipientStatus(m: Pick<ViewedMessage, 'status' | 'sandbox'>): string {
  switch (m.status) {
    case 'captured':
      return 'Test message, not sent';
    case 'queued':
    case 'sending':
      return 'Being sent';
    case 'scheduled':
      return 'Scheduled to be sent';
    case 'paused':
      return m.sandbox ? 'Test message, not sent' : 'Held, not sent yet';
    case 'sent':
      return 'Sent';
    case 'delivered':
    case 'complained':
      return 'Delivered';
    case 'bounced':
      return 'Not delivered: the receiving server refused it';
    case 'failed':
      return 'Not delivered';
    case 'suppressed':
    case 'cancelled':
      return 'Not sent';
    default:
      return 'Sent';
  }
}

/** The page: headers, delivery status, the body in a sandboxed frame, attachment names. */
export function viewerPage(m: ViewedMessage, bodyUrl: string, remoteImages: boolean): string {
  const subject = m.subject ?? '(no subject)';
  const attachments = m.attachments.length
    ? `<dt>Attachments</dt><dd><ul>${m.attachments.map((a) => `<li>${escapeHtml(a.filename ?? '(unnamed)')} <span class="note">${escapeHtml(a.content_type)}, ${size(a.size)}</span></li>`).join('')}</ul></dd>`
    : '';
  const images = remoteImages
    ? '<p class="note">Remote images are shown.</p>'
    : '<p class="note">Remote images are not loaded. <a href="?images=1">Show remote images</a></p>';
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex">
<title>${escapeHtml(subject)}</title><style>${STYLE}</style></head>
<body><main>
<h1>${escapeHtml(subject)}</h1>
<dl><dt>From</dt><dd>${escapeHtml(m.from)}</dd><dt>To</dt><dd>${list(m.to)}</dd>${m.cc.length ? `<dt>Cc</dt><dd>${list(m.cc)}</dd>` : ''}
<dt>Date</dt><dd><time datetime="${m.created_at}">${escapeHtml(m.created_at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC'))}</time></dd>
<dt>Status</dt><dd><span class="status">${escapeHtml(recipientStatus(m))}</span></dd>${attachments}</dl>
${images}
<iframe title="Message" sandbox="allow-popups allow-popups-to-escape-sandbox" referrerpolicy="no-referrer" src="${escapeHtml(bodyUrl)}"></iframe>
</main></body></html>`;
}

/** The one answer for an unknown message, a forged token and an expired link alike. */
export const NOT_FOUND_PAGE = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Not found</title></head><body><h1>Not found</h1><p>There is no message at this address, or the link is no longer valid.</p></body></html>`;
