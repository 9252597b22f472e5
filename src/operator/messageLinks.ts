import { viewerLink, type ViewerLink } from '../viewer/links.js';
import { audit } from './audit.js';
import type { OperatorContext } from './context.js';
import { requireMessage } from './messages.js';

/**
 * A public viewer link to one message (console share action, `postern message link`). The
 * link exposes the message to whoever holds it, so making one is recorded in the audit log
 * (without the link itself: it is a credential).
 */
export function messageLink(ctx: OperatorContext, secret: Buffer, base: string, id: string, expiresInSeconds?: number): ViewerLink {
  requireMessage(ctx, id);
  const link = viewerLink(ctx.config, secret, base, id, ctx.clock.now(), expiresInSeconds);
  audit(ctx, 'message.link', id, { expires_at: link.expires_at });
  return link;
}
