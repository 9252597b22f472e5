import { messageIdFloor } from '../ids.js';
import { inJsonArray, type Queries, type SqlParam } from './queries.js';
import type { MessageKey } from './messageActions.js';
import { fromStatuses, type MessageStatus } from '../contract/messageStates.js';
import { statusIn, type MessageRow } from './messages.js';

/** What the console's message list filters on; every field narrows. */
export interface MessageFilter {
  /** The projects to look in; null: every project (an owner). */
  projectIds: readonly string[] | null;
  environment?: 'production' | 'sandbox';
  statuses?: readonly MessageStatus[];
  /** Substrings, case-insensitive (ASCII). `from` matches the address or the display name; `to` any recipient: To, Cc or Bcc. */
  from?: string;
  to?: string;
  subject?: string;
  category?: string;
  tag?: string;
  /** Epoch ms, inclusive / exclusive. */
  createdAfter?: number;
  createdBefore?: number;
  id?: string;
  /** Only queued messages whose next attempt is after this instant (waiting for a retry). */
  waitingAfter?: number;
}

/**
 * Message ids start with their acceptance time, so the primary key orders them newest first at
 * no cost of its own. An SMTP message's id is minted when its DATA begins and its `created_at`
 * at commit: the id range is widened by this much and `created_at` then checked exactly.
 */
const ID_TIME_SLACK_MS = 3600_000;

const containing = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

function where(q: Queries, filter: MessageFilter, projectId: string | null, beforeId: string | null): { clause: string; params: Record<string, SqlParam> } {
  const parts: string[] = [];
  const params: Record<string, SqlParam> = {};
  if (projectId !== null) {
    parts.push('project_id = @project');
    params.project = projectId;
  }
  if (filter.environment) {
    parts.push('environment = @environment');
    params.environment = filter.environment;
  }
  if (filter.statuses && filter.statuses.length > 0) {
    parts.push(`status IN (${filter.statuses.map((_, i) => `@status${i}`).join(', ')})`);
    for (const [i, s] of filter.statuses.entries()) params[`status${i}`] = s;
  }
  // SQLite's LIKE ignores ASCII case; PostgreSQL's ILIKE does what it does.
  const like = q.dialect === 'postgres' ? 'ILIKE' : 'LIKE';
  const substring = (column: string, name: string, value: string | undefined) => {
    if (value === undefined) return;
    parts.push(`${column} ${like} @${name} ESCAPE '\\'`);
    params[name] = containing(value);
  };
  // The address or the display name ("Shop" finds Shop <orders@example.com>).
  if (filter.from !== undefined) {
    parts.push(`(from_email ${like} @from ESCAPE '\\' OR from_name ${like} @from ESCAPE '\\')`);
    params.from = containing(filter.from);
  }
  substring('recipients', 'to', filter.to);
  substring('subject', 'subject', filter.subject);
  if (filter.category !== undefined) {
    parts.push('category = @category');
    params.category = filter.category;
  }
  if (filter.tag !== undefined) {
    parts.push(inJsonArray(q, '@tag', 'messages.tags'));
    params.tag = filter.tag;
  }
  if (filter.createdAfter !== undefined) {
    parts.push('id >= @idFloor AND created_at >= @createdAfter');
    params.idFloor = messageIdFloor(filter.createdAfter - ID_TIME_SLACK_MS);
    params.createdAfter = filter.createdAfter;
  }
  if (filter.createdBefore !== undefined) {
    parts.push('id < @idCeiling AND created_at < @createdBefore');
    params.idCeiling = messageIdFloor(filter.createdBefore + ID_TIME_SLACK_MS);
    params.createdBefore = filter.createdBefore;
  }
  if (filter.id !== undefined) {
    parts.push('id = @id');
    params.id = filter.id;
  }
  if (filter.waitingAfter !== undefined) {
    parts.push(`${statusIn(fromStatuses('retry', 'queued'))} AND next_attempt_at > @waitingAfter`);
    params.waitingAfter = filter.waitingAfter;
  }
  if (beforeId !== null) {
    parts.push('id < @beforeId');
    params.beforeId = beforeId;
  }
  return { clause: parts.length > 0 ? `WHERE ${parts.join(' AND ')}` : '', params };
}

/**
 * Up to `limit` messages matching `filter`, newest first (by id), after `beforeId` when
 * continuing a page. Several projects are read one by one along their own index and merged.
 */
export async function searchMessages(q: Queries, filter: MessageFilter, beforeId: string | null, limit: number): Promise<MessageRow[]> {
  if (filter.projectIds !== null && filter.projectIds.length === 0) return [];
  const scopes: (string | null)[] = filter.projectIds === null ? [null] : [...new Set(filter.projectIds)];
  const rows: MessageRow[] = [];
  for (const projectId of scopes) {
    const { clause, params } = where(q, filter, projectId, beforeId);
    // Statements vary with the filter's shape; the cache keeps one per shape (a handful).
    rows.push(...(await q.all<MessageRow>(`SELECT * FROM messages ${clause} ORDER BY id DESC LIMIT @limit`, { ...params, limit })));
  }
  if (scopes.length === 1) return rows;
  return rows.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)).slice(0, limit);
}

/**
 * How many messages match `filter`, counting at most `cap` (a list's "1,834 messages"; past the
 * cap, "more than 10,000"): each project's count stops at the cap, so a wide filter costs no
 * more than reading that many index entries.
 */
export async function countMessages(q: Queries, filter: MessageFilter, cap: number): Promise<{ count: number; capped: boolean }> {
  if (filter.projectIds !== null && filter.projectIds.length === 0) return { count: 0, capped: false };
  let count = 0;
  for (const projectId of filter.projectIds === null ? [null] : [...new Set(filter.projectIds)]) {
    const { clause, params } = where(q, filter, projectId, null);
    const row = await q.get<{ n: number | string }>(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM messages ${clause} LIMIT @cap) AS matching`, { ...params, cap: cap + 1 - count });
    count += Number(row?.n ?? 0);
    if (count > cap) return { count: cap, capped: true };
  }
  return { count, capped: false };
}

/**
 * A message's key (MessageKey) in the order a bulk action's chunks go: SQLite's rowid order
 * (along the table), PostgreSQL's by id (along the primary key).
 */
function keyed<Row extends { rowid?: number; id: string }>(q: Queries, rows: Row[]): (Row & { key: MessageKey })[] {
  if (q.dialect === 'postgres') return rows.map((r) => ({ ...r, key: r.id })).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return rows.map((r) => ({ ...r, key: [r.rowid!, r.id] as MessageKey })).sort((a, b) => a.rowid! - b.rowid!);
}

/** The columns that reach a row fastest: SQLite's rowid and the id; PostgreSQL's id (no rowid). */
const keyColumns = (q: Queries) => (q.dialect === 'postgres' ? 'id' : 'rowid, id');

/**
 * Up to `limit` messages matching `filter`, as MessageKeys in the order of `keyed` (a bulk
 * action's candidates). Read in whatever order the chosen index gives (no ORDER BY: sorting ten
 * thousand rows would go through a temporary file), then sorted here.
 */
export async function matchingMessageKeys(q: Queries, filter: MessageFilter, limit: number): Promise<MessageKey[]> {
  if (filter.projectIds !== null && filter.projectIds.length === 0) return [];
  const rows: { rowid?: number; id: string }[] = [];
  for (const projectId of filter.projectIds === null ? [null] : [...new Set(filter.projectIds)]) {
    const { clause, params } = where(q, filter, projectId, null);
    rows.push(...(await q.all<{ rowid?: number; id: string }>(`SELECT ${keyColumns(q)} FROM messages ${clause} LIMIT @limit`, { ...params, limit: limit - rows.length })));
    if (rows.length >= limit) break;
  }
  return keyed(q, rows).map((r) => r.key);
}

export interface MessageState {
  key: MessageKey;
  id: string;
  project_id: string;
  status: MessageStatus;
  next_attempt_at: number | null;
}

/** The state of each of these messages that exists, in the order of `keyed`. */
export async function messageStates(q: Queries, ids: readonly string[]): Promise<MessageState[]> {
  const rows = await q.all<Omit<MessageState, 'key'> & { rowid?: number }>(
    `SELECT ${keyColumns(q)}, project_id, status, next_attempt_at FROM messages WHERE ${inJsonArray(q, 'id', '?')}`,
    JSON.stringify(ids),
  );
  return keyed(q, rows).map(({ rowid: _rowid, ...state }) => state);
}
