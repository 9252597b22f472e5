import type { AuditStamp } from '../commit/operatorWrites.js';
import { type AuditRow, listAudit } from '../store/audit.js';
import { iso, type OperatorContext } from './context.js';
import { OperatorError } from './errors.js';
import { decodeCursor, encodeCursor, pageLimit } from './pages.js';

/**
 * Who acts (the signed-in operator, else `cli`), when and from where, for the audit row every
 * state-changing operation writes in the transaction of its change. Details never carry a secret.
 */
export function auditStamp(ctx: OperatorContext): AuditStamp {
  return {
    at: ctx.clock.now(),
    actor: ctx.actor?.operatorId ?? 'cli',
    actor_email: ctx.actor?.email ?? null,
    client_ip: ctx.clientIp ?? null,
  };
}

/** Who, when, what and from where, for a row written elsewhere (with a bulk action's last chunk). */
export function auditRow(
  ctx: OperatorContext,
  action: string,
  target: string | null = null,
): Omit<AuditRow, 'seq' | 'details'> {
  return { ...auditStamp(ctx), action, target };
}

export interface AuditEntryView {
  seq: number;
  at: string;
  actor: string;
  actor_email: string | null;
  action: string;
  target: string | null;
  client_ip: string | null;
  details: Record<string, unknown> | null;
}

const view = (r: AuditRow): AuditEntryView => ({
  seq: r.seq,
  at: iso(r.at)!,
  actor: r.actor,
  actor_email: r.actor_email,
  action: r.action,
  target: r.target,
  client_ip: r.client_ip,
  details: r.details === null ? null : (JSON.parse(r.details) as Record<string, unknown>),
});

/** The audit log, newest first, a page at a time. */
export async function auditLog(
  ctx: OperatorContext,
  opts: {
    limit?: number;
    cursor?: string;
    actor?: string;
    actorEmail?: string;
    action?: string;
  } = {},
): Promise<{ entries: AuditEntryView[]; next_cursor: string | null }> {
  const limit = pageLimit(opts.limit, 50, 500);
  const before = opts.cursor === undefined ? undefined : Number(decodeCursor(opts.cursor));
  if (before !== undefined && !Number.isInteger(before))
    throw new OperatorError('invalid_argument', 'cursor is not one this list gave', 'cursor');
  const rows = await listAudit(
    ctx.store,
    {
      actor: opts.actor,
      actorEmail: opts.actorEmail?.trim() || undefined,
      action: opts.action,
      beforeSeq: before,
    },
    limit + 1,
  );
  const entries = rows.slice(0, limit).map(view);
  return {
    entries,
    next_cursor: rows.length > limit ? encodeCursor(String(entries[entries.length - 1].seq)) : null,
  };
}
