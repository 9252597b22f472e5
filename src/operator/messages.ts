import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { MESSAGE_STATUSES, type MessageStatus } from '../contract/messageStates.js';
import { type AttemptRow, attemptsFor, recipientOutcomesFor } from '../store/delivery.js';
import { type EventRow, eventsForMessage } from '../store/events.js';
import type { MessageAction } from '../store/messageActions.js';
import { BODY_IN_INDEX, openStoredMime, storedMime } from '../store/messageBodies.js';
import { countMessages, type MessageFilter, searchMessages } from '../store/messageSearch.js';
import { getMessage, listMessages, type MessageRow } from '../store/messages.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { decodeCursor, encodeCursor, pageLimit } from './pages.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

/** The message vocabulary the console speaks, as the index keeps it. */
export type { MessageAction, MessageFilter, MessageStatus };

const STATUSES: readonly MessageStatus[] = MESSAGE_STATUSES;

export type MessageSummary = ReturnType<typeof summary>;

export function summary(m: MessageRow) {
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
    /** The From display name, when the message gave one. */
    from_name: m.from_name ?? null,
    to: recipients.to,
    subject: m.subject,
    category: m.category,
    tags: JSON.parse(m.tags) as string[],
    scheduled_at: iso(m.scheduled_at),
    created_at: iso(m.created_at)!,
    // Where a queued message stands on the retry ladder: attempts made, when the next is due, why the last failed.
    attempts: m.attempts,
    next_attempt_at: iso(m.next_attempt_at),
    last_error: m.last_error,
  };
}

export async function messageList(
  ctx: OperatorContext,
  projectId: string,
  status?: string,
  limit = 50,
) {
  await requireProject(ctx, projectId);
  if (status !== undefined && !STATUSES.includes(status as MessageStatus))
    throw new OperatorError(
      'invalid_argument',
      `--status must be one of: ${STATUSES.join(', ')}`,
      'status',
    );
  if (!Number.isInteger(limit) || limit < 1 || limit > 10000)
    throw new OperatorError(
      'invalid_argument',
      '--limit must be an integer from 1 to 10000',
      'limit',
    );
  return { messages: (await listMessages(ctx.store, projectId, status, limit)).map(summary) };
}

export async function requireMessage(ctx: OperatorContext, id: string): Promise<MessageRow> {
  const m = await getMessage(ctx.store, id);
  if (!m) throw notFound('message', id);
  return m;
}

export async function messageShow(ctx: OperatorContext, id: string) {
  const m = await requireMessage(ctx, id);
  const recipients = JSON.parse(m.recipients) as { to: string[]; cc: string[]; bcc: string[] };
  const attempts = await attemptsFor(ctx.store, id);
  const events = await eventsForMessage(ctx.store, id);
  const outcomes = await recipientOutcomesFor(ctx.store, id);
  return {
    ...summary(m),
    hold_reason: m.hold_reason,
    cc: recipients.cc,
    bcc: recipients.bcc,
    metadata: JSON.parse(m.metadata) as Record<string, string>,
    routing: JSON.parse(m.routing) as unknown,
    provider_options: m.provider_options ? (JSON.parse(m.provider_options) as unknown) : null,
    idempotency_key: m.idempotency_key,
    size_bytes: m.size_bytes,
    // null: the body is kept in the index (a small message), not in a spool file.
    spool_path: m.spool_path === BODY_IN_INDEX ? null : m.spool_path,
    attempts: m.attempts,
    next_attempt_at: iso(m.next_attempt_at),
    provider: m.provider_slug,
    provider_message_id: m.provider_message_id,
    last_error: m.last_error,
    updated_at: iso(m.updated_at)!,
    attempts_log: attempts.map((a) => ({
      provider: a.provider_slug,
      provider_account_id: a.provider_account_id,
      started_at: iso(a.started_at)!,
      finished_at: iso(a.finished_at)!,
      outcome: a.outcome,
      reply: a.reply,
      provider_message_id: a.provider_message_id,
    })),
    recipient_outcomes: outcomes,
    recipients: recipientStates(m, recipients, outcomes),
    events: events.map((e) => ({ type: e.type, created_at: iso(e.created_at)! })),
    timeline: timeline(events, attempts),
  };
}

/** The stored MIME of a message as a stream (`message show --raw`, the console's raw view and parsed content). */
export async function openMessageMime(ctx: OperatorContext, id: string): Promise<Readable> {
  return openStoredMime(await storedMime(ctx.store, ctx.spoolRoot, await requireMessage(ctx, id)));
}

export type TimelineEntry =
  | { kind: 'event'; at: string; type: string; detail: Record<string, unknown> }
  | {
      kind: 'attempt';
      at: string;
      finished_at: string;
      duration_ms: number;
      provider: string | null;
      provider_account_id: string | null;
      outcome: AttemptRow['outcome'];
      /** The relay's or provider's reply. */
      reply: string | null;
      provider_message_id: string | null;
    };

/**
 * Events and hand-off attempts in time order: the same shape whichever door the message came
 * through. An event's detail is its data without the `mail` block every event repeats.
 */
function timeline(events: EventRow[], attempts: AttemptRow[]): TimelineEntry[] {
  const entries: { t: number; order: number; entry: TimelineEntry }[] = [];
  for (const e of events) {
    const { mail: _mail, ...detail } = JSON.parse(e.data) as Record<string, unknown>;
    // An outcome event follows the attempt that produced it when both carry one instant.
    entries.push({
      t: e.created_at,
      order: 1,
      entry: { kind: 'event', at: iso(e.created_at)!, type: e.type, detail },
    });
  }
  for (const a of attempts) {
    entries.push({
      t: a.started_at,
      order: 0,
      entry: {
        kind: 'attempt',
        at: iso(a.started_at)!,
        finished_at: iso(a.finished_at)!,
        duration_ms: a.finished_at - a.started_at,
        provider: a.provider_slug,
        provider_account_id: a.provider_account_id,
        outcome: a.outcome,
        reply: a.reply,
        provider_message_id: a.provider_message_id,
      },
    });
  }
  return entries.sort((a, b) => a.t - b.t || a.order - b.order).map((e) => e.entry);
}

/** Every envelope recipient with where it stands: its own outcome when one is recorded, else the message's. */
function recipientStates(
  m: MessageRow,
  list: { to: string[]; cc: string[]; bcc: string[] },
  outcomes: { email: string; status: string; reply: string | null }[],
) {
  const byEmail = new Map(outcomes.map((o) => [o.email.toLowerCase(), o]));
  const pending = new Set(
    (m.pending_recipients ? (JSON.parse(m.pending_recipients) as string[]) : []).map((e) =>
      e.toLowerCase(),
    ),
  );
  const handedOff = ['sent', 'delivered', 'bounced', 'complained'].includes(m.status);
  const state = (email: string, kind: 'to' | 'cc' | 'bcc') => {
    const own = byEmail.get(email.toLowerCase());
    const status =
      own?.status ?? (pending.has(email.toLowerCase()) ? 'pending' : handedOff ? 'sent' : m.status);
    return { email, kind, status, reply: own?.reply ?? null };
  };
  return [
    ...list.to.map((e) => state(e, 'to')),
    ...list.cc.map((e) => state(e, 'cc')),
    ...list.bcc.map((e) => state(e, 'bcc')),
  ];
}

/** Past this many matches a list says "more than 10,000" instead of counting on. */
export const MESSAGE_COUNT_CAP = 10_000;

/**
 * The console's message search: the filter, a page of up to `limit` newest first, where the next
 * page starts, and how many messages match in all (up to MESSAGE_COUNT_CAP).
 */
export async function messageSearch(
  ctx: OperatorContext,
  filter: MessageFilter,
  opts: { limit?: number; cursor?: string } = {},
) {
  const limit = pageLimit(opts.limit, 50, 500);
  const before = opts.cursor === undefined ? null : decodeCursor(opts.cursor);
  const rows = await searchMessages(ctx.store, filter, before, limit + 1);
  const page = rows.slice(0, limit);
  const total = await countMessages(ctx.store, filter, MESSAGE_COUNT_CAP);
  return {
    messages: page.map(summary),
    next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1].id) : null,
    total: total.count,
    total_capped: total.capped,
  };
}

/**
 * One message: release (a held or captured message goes on to delivery, scheduled if its time
 * is still ahead), cancel (one not handed to a provider yet stops), retry (one waiting on the
 * retry ladder is due at once; one already due stays as it is). The rule is the store's
 * `applyMessageAction`, the same one bulk actions apply (commit/operatorWrites.ts).
 */
export async function messageAction(ctx: OperatorContext, action: MessageAction, id: string) {
  await write(ctx, {
    type: 'message_one',
    action,
    id,
    now: ctx.clock.now(),
    stamp: auditStamp(ctx),
  });
  return summary(await requireMessage(ctx, id));
}

export const releaseMessage = (ctx: OperatorContext, id: string) =>
  messageAction(ctx, 'release', id);
export const cancelMessage = (ctx: OperatorContext, id: string) => messageAction(ctx, 'cancel', id);
export const retryMessage = (ctx: OperatorContext, id: string) => messageAction(ctx, 'retry', id);

/** Deletes a captured (sandbox) message: its index rows, then its spool file. Nothing else can be deleted. */
export async function deleteMessage(
  ctx: OperatorContext,
  id: string,
): Promise<{ id: string; deleted: true }> {
  const { spool_path: file } = await write(ctx, {
    type: 'message_delete',
    id,
    stamp: auditStamp(ctx),
  });
  // After the commit: a crash in between leaves a file without a row, which start-up removes.
  if (file !== null) await rm(path.join(ctx.spoolRoot, file), { force: true });
  return { id, deleted: true };
}

/**
 * A message as the console shows it: `messageShow` with the timeline and recipients in place of
 * the CLI's separate attempt, event and outcome lists, and without the spool file's path.
 */
export async function messageDetail(ctx: OperatorContext, id: string) {
  const {
    spool_path: _path,
    attempts_log: _attempts,
    events: _events,
    recipient_outcomes: _outcomes,
    ...detail
  } = await messageShow(ctx, id);
  return detail;
}
