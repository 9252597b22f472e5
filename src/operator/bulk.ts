import { ACTION_FROM, type MessageAction, type MessageKey } from '../store/messageActions.js';
import { matchingMessageKeys, messageStates, type MessageFilter } from '../store/messageSearch.js';
import { applyOperatorWrite, type OperatorWrite } from '../store/operatorWrites.js';
import { auditRow } from './audit.js';
import type { OperatorContext } from './context.js';
import { OperatorError } from './errors.js';

/** The most messages one bulk action may touch (a list of ids, or what a filter matches). */
export const BULK_MAX_MESSAGES = 10_000;
/** Messages per transaction: short enough that acceptance commits never wait long behind one. */
export const BULK_CHUNK = 500;

export type BulkTarget = { ids: readonly string[] } | { filter: MessageFilter };

export interface BulkResult {
  action: MessageAction;
  /** Messages found (visible to the operator) in a state the action applies to. */
  matched: number;
  /** Of those, the ones this action changed (another change may have come first). */
  changed: number;
  /** Ids given that were found but in a state the action does not apply to. */
  skipped: number;
  /** Ids given that do not exist or are not visible to the operator. */
  not_found: number;
  /** The ids changed, when `ids` were given (a filter's can be many: count only). */
  changed_ids?: string[];
}

/**
 * Applies `action` to a list of ids or to what a filter matches, in the states the action applies
 * to (a filter is narrowed to them; retry: queued messages whose next attempt is ahead), at most
 * BULK_MAX_MESSAGES. Chunks of BULK_CHUNK run one transaction each, on the server through its
 * index writer thread (`ctx.writer`), so neither door's event loop nor its commits wait long;
 * the last chunk is flushed to disk before the answer. `scope`: the projects the operator may
 * touch (null: all).
 */
export async function bulkMessageAction(ctx: OperatorContext, action: MessageAction, target: BulkTarget, scope: readonly string[] | null): Promise<BulkResult> {
  const now = ctx.clock.now();
  let candidates: MessageKey[];
  const counts = { skipped: 0, not_found: 0 };
  if ('ids' in target) {
    const ids = [...new Set(target.ids)];
    if (ids.length > BULK_MAX_MESSAGES) throw new OperatorError('invalid_argument', `at most ${BULK_MAX_MESSAGES} ids at once`, 'ids', 'too_many');
    const found = ctx.reader ? await ctx.reader.messageStates(ids) : messageStates(ctx.db, ids);
    const visible = found.filter((m) => scope === null || scope.includes(m.project_id));
    counts.not_found = ids.length - visible.length;
    candidates = visible.filter((m) => ACTION_FROM[action].includes(m.status) && (action !== 'retry' || (m.next_attempt_at ?? 0) > now)).map((m): MessageKey => [m.rowid, m.id]);
    counts.skipped = visible.length - candidates.length;
  } else {
    const narrowed: MessageFilter = {
      ...target.filter,
      projectIds: narrowScope(target.filter.projectIds, scope),
      statuses: (target.filter.statuses ?? ACTION_FROM[action]).filter((s) => ACTION_FROM[action].includes(s)),
      ...(action === 'retry' ? { waitingAfter: now } : {}),
    };
    const read = (filter: MessageFilter, limit: number) => (ctx.reader ? ctx.reader.matchingMessageKeys(filter, limit) : Promise.resolve(matchingMessageKeys(ctx.db, filter, limit)));
    candidates = narrowed.statuses!.length === 0 ? [] : await read(narrowed, BULK_MAX_MESSAGES + 1);
    if (candidates.length > BULK_MAX_MESSAGES) {
      throw new OperatorError('invalid_argument', `the filter matches more than ${BULK_MAX_MESSAGES} messages the action applies to; narrow it`, 'filter', 'too_many');
    }
  }
  const changed: string[] = [];
  const auditDetails = 'ids' in target ? { ids: target.ids.length } : { filter: describeFilter(target.filter) };
  for (let i = 0; i < candidates.length; i += BULK_CHUNK) {
    const chunk = candidates.slice(i, i + BULK_CHUNK);
    const last = i + BULK_CHUNK >= candidates.length;
    // The audit row rides with the last chunk: one transaction, and no write of the event loop's own.
    const work: OperatorWrite = { type: 'message_action', action, rows: chunk, now, durable: last, audit: last ? { row: auditRow(ctx, `message.bulk_${action}`), details: auditDetails, changedBefore: changed.length } : undefined };
    if (ctx.writer) {
      changed.push(...(await ctx.writer.write(work)).changed);
    } else {
      changed.push(...ctx.db.transaction(() => applyOperatorWrite(ctx.db, work).changed).immediate());
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  const result: BulkResult = { action, matched: candidates.length, changed: changed.length, ...counts };
  if ('ids' in target) result.changed_ids = changed;
  return result;
}

/** The projects a filter may look in: the ones it names, within the operator's scope. */
function narrowScope(named: readonly string[] | null, scope: readonly string[] | null): readonly string[] | null {
  if (scope === null) return named;
  if (named === null) return scope;
  return named.filter((p) => scope.includes(p));
}

function describeFilter(filter: MessageFilter): Record<string, unknown> {
  return Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== undefined && v !== null));
}
