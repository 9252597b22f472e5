import path from 'node:path';
import { attemptsFor, recipientOutcomesFor } from '../store/delivery.js';
import { eventsForMessage } from '../store/events.js';
import { FINISHED_STATUSES, getMessage, listMessages, LIVE_STATUSES, transitionMessage, type MessageRow, type MessageStatus } from '../store/messages.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';

const STATUSES: readonly MessageStatus[] = [...LIVE_STATUSES, ...FINISHED_STATUSES];

function summary(m: MessageRow) {
  const recipients = JSON.parse(m.recipients) as { to: string[]; cc: string[]; bcc: string[] };
  return {
    id: m.id,
    project_id: m.project_id,
    environment: m.environment,
    sandbox: m.environment === 'sandbox',
    source: m.source,
    status: m.status,
    paused: m.hold_reason !== null,
    from: m.from_email,
    to: recipients.to,
    subject: m.subject,
    category: m.category,
    scheduled_at: iso(m.scheduled_at),
    created_at: iso(m.created_at)!,
  };
}

export function messageList(ctx: OperatorContext, projectId: string, status?: string, limit = 50) {
  requireProject(ctx, projectId);
  if (status !== undefined && !STATUSES.includes(status as MessageStatus)) throw new OperatorError('invalid_argument', `--status must be one of: ${STATUSES.join(', ')}`);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10000) throw new OperatorError('invalid_argument', '--limit must be an integer from 1 to 10000');
  return { messages: listMessages(ctx.db, projectId, status, limit).map(summary) };
}

function requireMessage(ctx: OperatorContext, id: string): MessageRow {
  const m = getMessage(ctx.db, id);
  if (!m) throw notFound('message', id);
  return m;
}

export function messageShow(ctx: OperatorContext, id: string) {
  const m = requireMessage(ctx, id);
  const recipients = JSON.parse(m.recipients) as { to: string[]; cc: string[]; bcc: string[] };
  return {
    ...summary(m),
    hold_reason: m.hold_reason,
    cc: recipients.cc,
    bcc: recipients.bcc,
    tags: JSON.parse(m.tags) as string[],
    metadata: JSON.parse(m.metadata) as Record<string, string>,
    routing: JSON.parse(m.routing) as unknown,
    provider_options: m.provider_options ? (JSON.parse(m.provider_options) as unknown) : null,
    idempotency_key: m.idempotency_key,
    size_bytes: m.size_bytes,
    spool_path: m.spool_path,
    attempts: m.attempts,
    next_attempt_at: iso(m.next_attempt_at),
    provider: m.provider_slug,
    provider_message_id: m.provider_message_id,
    last_error: m.last_error,
    updated_at: iso(m.updated_at)!,
    attempts_log: attemptsFor(ctx.db, id).map((a) => ({
      provider: a.provider_slug,
      provider_account_id: a.provider_account_id,
      started_at: iso(a.started_at)!,
      finished_at: iso(a.finished_at)!,
      outcome: a.outcome,
      reply: a.reply,
      provider_message_id: a.provider_message_id,
    })),
    recipient_outcomes: recipientOutcomesFor(ctx.db, id),
    events: eventsForMessage(ctx.db, id).map((e) => ({ type: e.type, created_at: iso(e.created_at)! })),
  };
}

/** The stored MIME file of a message, for `message show --raw`. */
export function messageRawPath(ctx: OperatorContext, id: string): string {
  return path.join(ctx.spoolRoot, requireMessage(ctx, id).spool_path);
}

/** A held (paused) or captured message goes on to delivery: scheduled if its time is still ahead. */
export function releaseMessage(ctx: OperatorContext, id: string) {
  const now = ctx.clock.now();
  return ctx.db.transaction(() => {
    const m = requireMessage(ctx, id);
    if (m.status !== 'paused' && m.status !== 'captured') throw new OperatorError('conflict', `message ${id} is ${m.status}; only paused or captured messages can be released`);
    if (m.hold_reason === 'project' && requireProject(ctx, m.project_id).paused === 1) throw new OperatorError('conflict', `message ${id} is held by its paused project; resume the project`);
    const scheduled = m.scheduled_at !== null && m.scheduled_at > now;
    transitionMessage(ctx.db, id, ['paused', 'captured'], { status: scheduled ? 'scheduled' : 'queued', hold_reason: null, next_attempt_at: scheduled ? m.scheduled_at : now }, now);
    return summary(requireMessage(ctx, id));
  }).immediate();
}

/** Stops a message that has not been handed to a provider yet. */
export function cancelMessage(ctx: OperatorContext, id: string) {
  const now = ctx.clock.now();
  return ctx.db.transaction(() => {
    const m = requireMessage(ctx, id);
    const cancellable: MessageStatus[] = ['queued', 'scheduled', 'paused', 'captured'];
    if (!cancellable.includes(m.status)) throw new OperatorError('conflict', `message ${id} is ${m.status}; only queued, scheduled, paused or captured messages can be cancelled`);
    transitionMessage(ctx.db, id, cancellable, { status: 'cancelled', hold_reason: null, next_attempt_at: null }, now);
    return summary(requireMessage(ctx, id));
  }).immediate();
}
