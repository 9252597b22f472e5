import type { Readable } from 'node:stream';
import type { PosternConfig } from '../config/load.js';
import { newViewerLinkId } from '../ids.js';
import {
  viewerLinkOf,
  viewerLinkToken,
  viewerToken,
  viewerTokenValid,
} from '../policy/viewerTokens.js';
import { getMessage } from '../store/messages.js';
import { getViewerLink, liveViewerLinks, type ViewerLinkRow } from '../store/viewerLinks.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { type AttachmentInfo, messageContent, openAttachment } from './messageContent.js';
import { requireMessage } from './messages.js';
import { write } from './writer.js';

export interface ViewerLink {
  /** The URL itself is never kept. */
  id: string;
  url: string;
  expires_at: string;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

export function durationSeconds(text: string): number | null {
  const m = /^(\d{1,9})([smhdw]?)$/.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * UNITS[m[2] || 's'];
}

/** `viewer.base_url`, else the first production HTTP listener as configured. */
export function configuredViewerBase(
  config: Pick<PosternConfig, 'viewer' | 'listeners'>,
): string | null {
  if (config.viewer.base_url) return config.viewer.base_url;
  const door =
    config.listeners.find((l) => l.protocol === 'http' && l.environment === 'production') ??
    config.listeners.find((l) => l.protocol === 'http');
  if (!door) return null;
  const host =
    door.host === '0.0.0.0'
      ? '127.0.0.1'
      : door.host === '::'
        ? '[::1]'
        : door.host.includes(':')
          ? `[${door.host}]`
          : door.host;
  return `http://${host}:${door.port}`;
}

/** Audited (without the link: it is a credential), since the link exposes the message to whoever holds it. */
export async function messageLink(
  ctx: OperatorContext,
  secret: Buffer,
  base: string,
  id: string,
  expiresInSeconds?: number,
): Promise<ViewerLink> {
  await requireMessage(ctx, id);
  const seconds = expiresInSeconds ?? ctx.config.viewer.link_expiry_seconds;
  const max = ctx.config.viewer.max_link_expiry_seconds;
  if (!Number.isInteger(seconds) || seconds < 60 || seconds > max) {
    throw new OperatorError(
      'invalid_argument',
      `the expiry must be from 60 seconds to ${max} seconds (viewer.max_link_expiry_seconds)`,
      'expires_in_seconds',
      'out_of_range',
    );
  }
  const now = ctx.clock.now();
  const expiresAtMs = Math.floor((now + seconds * 1000) / 1000) * 1000;
  const linkId = newViewerLinkId();
  const url = `${base.replace(/\/+$/, '')}/view/${encodeURIComponent(id)}/${viewerLinkToken(secret, id, expiresAtMs, linkId)}`;
  const stamp = auditStamp(ctx);
  // The link opens only while this record is kept and not revoked.
  await write(ctx, {
    type: 'message_link',
    id,
    link: {
      id: linkId,
      message_id: id,
      created_at: now,
      expires_at: expiresAtMs,
      created_by: stamp.actor,
      created_by_email: stamp.actor_email,
    },
    stamp,
  });
  return { id: linkId, url, expires_at: new Date(expiresAtMs).toISOString() };
}

const linkView = (l: ViewerLinkRow) => ({
  id: l.id,
  message_id: l.message_id,
  created_at: iso(l.created_at)!,
  expires_at: iso(l.expires_at)!,
  created_by: l.created_by,
  created_by_email: l.created_by_email,
});

export async function messageLinks(ctx: OperatorContext, id: string) {
  await requireMessage(ctx, id);
  return { links: (await liveViewerLinks(ctx.store, id, ctx.clock.now())).map(linkView) };
}

/** From now on it answers the viewer's 404, as a forged one. */
export async function revokeMessageLink(
  ctx: OperatorContext,
  id: string,
  linkId: string,
): Promise<{ id: string; revoked: true }> {
  await write(ctx, {
    type: 'message_link_revoke',
    id,
    link_id: linkId,
    now: ctx.clock.now(),
    stamp: auditStamp(ctx),
  });
  return { id: linkId, revoked: true };
}

async function linkOpens(
  ctx: OperatorContext,
  secret: Buffer,
  id: string,
  token: string,
): Promise<boolean> {
  const now = ctx.clock.now();
  const linkId = viewerLinkOf(secret, id, token, now);
  if (linkId === null) return false;
  const link = await getViewerLink(ctx.store, linkId);
  return (
    link !== undefined &&
    link.message_id === id &&
    link.revoked_at === null &&
    link.expires_at > now
  );
}

/** Never Bcc, metadata, provider or routing details. */
export interface ViewedMessage {
  subject: string | null;
  from: string;
  to: string[];
  cc: string[];
  created_at: string;
  status: string;
  sandbox: boolean;
  attachments: Pick<AttachmentInfo, 'filename' | 'content_type' | 'size'>[];
  html: string | null;
  text: string | null;
  /** Served to the body frame, never listed. */
  inline_parts: { index: number; content_id: string }[];
}

/** null alike for an unknown id, a forged token, an expired link and a message whose file is gone. */
export async function viewedMessage(
  ctx: OperatorContext,
  secret: Buffer,
  id: string,
  token: string,
): Promise<ViewedMessage | null> {
  if (!(await linkOpens(ctx, secret, id, token))) return null;
  const m = await getMessage(ctx.store, id);
  if (!m) return null;
  const content = await messageContent(ctx, id).catch(() => null);
  if (!content) return null;
  const recipients = JSON.parse(m.recipients) as { to: string[]; cc: string[] };
  return {
    subject: m.subject,
    from: m.from_email,
    to: recipients.to,
    cc: recipients.cc,
    created_at: new Date(m.created_at).toISOString(),
    status: m.status,
    sandbox: m.environment === 'sandbox',
    attachments: content.attachments
      .filter((a) => a.disposition === 'attachment')
      .map((a) => ({ filename: a.filename, content_type: a.content_type, size: a.size })),
    html: content.html,
    text: content.text,
    inline_parts: content.attachments.flatMap((a) =>
      a.content_id ? [{ index: a.index, content_id: a.content_id }] : [],
    ),
  };
}

/** Not found: no such part, or an attachment (neither the viewer nor the preview frame serves those). */
async function openInlinePart(
  ctx: OperatorContext,
  id: string,
  index: number,
): Promise<{ attachment: AttachmentInfo; stream: Readable }> {
  const part = await openAttachment(ctx, id, index);
  if (part.attachment.content_id === null) {
    part.stream.destroy();
    throw notFound('inline part', `${index} of message ${id}`);
  }
  return part;
}

export async function viewedInlinePart(
  ctx: OperatorContext,
  secret: Buffer,
  id: string,
  token: string,
  index: number,
): Promise<{ attachment: AttachmentInfo; stream: Readable } | null> {
  if (!(await linkOpens(ctx, secret, id, token))) return null;
  return openInlinePart(ctx, id, index).catch((err: unknown) => {
    if (err instanceof OperatorError && err.code === 'not_found') return null;
    throw err;
  });
}

/** The preview frame's opaque origin sends no cookie, so its inline parts take a token of their own, for an hour. */
const PREVIEW_PART_TOKEN_MS = 3600_000;

export function previewPartToken(ctx: OperatorContext, secret: Buffer, id: string): string {
  return viewerToken(secret, id, ctx.clock.now() + PREVIEW_PART_TOKEN_MS, 'inline');
}

export async function previewPart(
  ctx: OperatorContext,
  secret: Buffer,
  id: string,
  token: string,
  index: number,
): Promise<{ attachment: AttachmentInfo; stream: Readable }> {
  if (!viewerTokenValid(secret, id, token, ctx.clock.now(), 'inline'))
    throw notFound('message', id);
  return openInlinePart(ctx, id, index);
}
