import {
  ACTION_FROM,
  countChanged,
  type MessageAction,
  type MessageKey,
  type MessagesChanged,
} from '../store/messageActions.js';

export type { MessagesChanged };

import type { MessageActionChunk } from '../commit/operatorBookkeeping.js';
import { type MessageFilter, matchingMessageKeys, messageStates } from '../store/messageSearch.js';
import type { Queries } from '../store/queries.js';
import { auditRow } from './audit.js';
import type { BulkCandidates, BulkTarget } from './bulkTarget.js';
import type { OperatorContext } from './context.js';
import { OperatorError } from './errors.js';
import { write } from './writer.js';

export const BULK_MAX_MESSAGES = 10_000;
/** Short enough that acceptance commits never wait long behind one. */
export const BULK_CHUNK = 500;
/** Chunks spread over about this long, so fewer commit cycles shared with acceptance carry one. */
export const BULK_SPREAD_MS = 1200;

export interface BulkResult {
  action: MessageAction;
  matched: number;
  /** Another change may have come first. */
  changed: number;
  skipped: number;
  not_found: number;
  /** When `ids` were given (a filter's can be many: count only). */
  changed_ids?: string[];
}

/** Where its changes are is for the console's live streams, never in the answer. */
export interface BulkOutcome {
  result: BulkResult;
  changedIn: MessagesChanged[];
}

function narrowScope(
  named: readonly string[] | null,
  scope: readonly string[] | null,
): readonly string[] | null {
  if (scope === null) return named;
  if (named === null) return scope;
  return named.filter((p) => scope.includes(p));
}

/** Pure reads, on the bulk reader thread: the event loop handles chunks as strings, never ten thousand rows. */
export async function bulkCandidates(
  store: Queries,
  action: MessageAction,
  target: BulkTarget,
  scope: readonly string[] | null,
  now: number,
): Promise<BulkCandidates> {
  let keys: MessageKey[];
  const counts = { skipped: 0, not_found: 0 };
  if ('ids' in target) {
    const ids = [...new Set(target.ids)];
    if (ids.length > BULK_MAX_MESSAGES)
      throw new OperatorError(
        'invalid_argument',
        `at most ${BULK_MAX_MESSAGES} ids at once`,
        'ids',
        'too_many',
      );
    const visible = (await messageStates(store, ids)).filter(
      (m) => scope === null || scope.includes(m.project_id),
    );
    counts.not_found = ids.length - visible.length;
    keys = visible
      .filter(
        (m) =>
          ACTION_FROM[action].includes(m.status) &&
          (action !== 'retry' || (m.next_attempt_at ?? 0) > now),
      )
      .map((m) => m.key);
    counts.skipped = visible.length - keys.length;
  } else {
    const statuses = (target.filter.statuses ?? ACTION_FROM[action]).filter((s) =>
      ACTION_FROM[action].includes(s),
    );
    const narrowed: MessageFilter = {
      ...target.filter,
      projectIds: narrowScope(target.filter.projectIds, scope),
      statuses,
      ...(action === 'retry' ? { waitingAfter: now } : {}),
    };
    keys =
      statuses.length === 0
        ? []
        : await matchingMessageKeys(store, narrowed, BULK_MAX_MESSAGES + 1);
    if (keys.length > BULK_MAX_MESSAGES) {
      throw new OperatorError(
        'invalid_argument',
        `the filter matches more than ${BULK_MAX_MESSAGES} messages the action applies to; narrow it`,
        'filter',
        'too_many',
      );
    }
  }
  const chunks: string[] = [];
  for (let i = 0; i < keys.length; i += BULK_CHUNK)
    chunks.push(JSON.stringify(keys.slice(i, i + BULK_CHUNK)));
  return { matched: keys.length, ...counts, chunks };
}

/** Counted as bulkMessageAction would find it, nothing changed (the console's confirmation). Not audited. */
export async function bulkDryRun(
  ctx: OperatorContext,
  action: MessageAction,
  target: BulkTarget,
  scope: readonly string[] | null,
): Promise<BulkResult & { dry_run: true }> {
  const now = ctx.clock.now();
  const found = ctx.reader
    ? await ctx.reader.bulkCandidates(action, target, scope, now)
    : await bulkCandidates(ctx.store, action, target, scope, now);
  return {
    action,
    matched: found.matched,
    changed: 0,
    skipped: found.skipped,
    not_found: found.not_found,
    dry_run: true,
  };
}

/** One transaction per chunk via the index writer thread; the last carries the audit row and is flushed before the answer. */
export async function bulkMessageAction(
  ctx: OperatorContext,
  action: MessageAction,
  target: BulkTarget,
  scope: readonly string[] | null,
): Promise<BulkOutcome> {
  const now = ctx.clock.now();
  const found = ctx.reader
    ? await ctx.reader.bulkCandidates(action, target, scope, now)
    : await bulkCandidates(ctx.store, action, target, scope, now);
  const wantIds = 'ids' in target;
  const changedIds: string[] = [];
  const changedIn: MessagesChanged[] = [];
  let changed = 0;
  const details =
    'ids' in target ? { ids: target.ids.length } : { filter: describeFilter(target.filter) };
  const started = performance.now();
  for (const [i, rows] of found.chunks.entries()) {
    // Chunk i is due by started + SPREAD × i / n: wait for that, never hurry.
    const due = started + (BULK_SPREAD_MS * i) / found.chunks.length - performance.now();
    if (ctx.writer && due > 1) await new Promise((resolve) => setTimeout(resolve, due));
    const last = i === found.chunks.length - 1;
    const work: MessageActionChunk = {
      type: 'message_action',
      action,
      rows,
      now,
      returnIds: wantIds,
      durable: last,
      // The audit row rides with the last chunk: one transaction, and no write of the event loop's own.
      audit: last
        ? { row: auditRow(ctx, `message.bulk_${action}`), details, changedBefore: changed }
        : undefined,
    };
    const result = await write(ctx, work);
    changed += result.changedCount;
    countChanged(changedIn, result.changedIn);
    if (wantIds) changedIds.push(...result.changed);
    if (!ctx.writer) await new Promise((resolve) => setImmediate(resolve));
  }
  const result: BulkResult = {
    action,
    matched: found.matched,
    changed,
    skipped: found.skipped,
    not_found: found.not_found,
  };
  if (wantIds) result.changed_ids = changedIds;
  return { result, changedIn };
}

function describeFilter(filter: MessageFilter): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(filter).filter(([, v]) => v !== undefined && v !== null),
  );
}
