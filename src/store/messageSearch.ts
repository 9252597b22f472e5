import { fromStatuses, type MessageStatus } from '../contract/messageStates.js';
import { messageIdFloor } from '../ids.js';
import type { MessageKey } from './messageActions.js';
import { type MessageRow, statusIn } from './messages.js';
import { inJsonArray, type Queries, type SqlParam } from './queries.js';

export interface MessageFilter {
  /** null: every project (an owner). */
  projectIds: readonly string[] | null;
  environment?: 'production' | 'sandbox';
  statuses?: readonly MessageStatus[];
  /** Case-insensitive (ASCII). `from`: address or display name; `to`: any recipient, Bcc included. */
  from?: string;
  to?: string;
  subject?: string;
  category?: string;
  tag?: string;
  createdAfter?: number;
  createdBefore?: number;
  id?: string;
  /** Waiting for a retry. */
  waitingAfter?: number;
}

/** Ids start with their acceptance time; an SMTP id is minted at DATA and `created_at` at commit, so the id range is widened by this. */
const ID_TIME_SLACK_MS = 3600_000;

const containing = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

function where(
  q: Queries,
  filter: MessageFilter,
  projectId: string | null,
  beforeId: string | null,
): { clause: string; params: Record<string, SqlParam> } {
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
  const like = q.dialect === 'postgres' ? 'ILIKE' : 'LIKE';
  const substring = (column: string, name: string, value: string | undefined) => {
    if (value === undefined) return;
    parts.push(`${column} ${like} @${name} ESCAPE '\\'`);
    params[name] = containing(value);
  };
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

/** Several projects are read one by one along their own index and merged. */
export async function searchMessages(
  q: Queries,
  filter: MessageFilter,
  beforeId: string | null,
  limit: number,
): Promise<MessageRow[]> {
  if (filter.projectIds !== null && filter.projectIds.length === 0) return [];
  const scopes: (string | null)[] =
    filter.projectIds === null ? [null] : [...new Set(filter.projectIds)];
  const rows: MessageRow[] = [];
  for (const projectId of scopes) {
    const { clause, params } = where(q, filter, projectId, beforeId);
    // Statements vary with the filter's shape; the cache keeps one per shape (a handful).
    rows.push(
      ...(await q.all<MessageRow>(
        `SELECT * FROM messages ${clause} ORDER BY id DESC LIMIT @limit`,
        { ...params, limit },
      )),
    );
  }
  if (scopes.length === 1) return rows;
  return rows.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)).slice(0, limit);
}

/** Each project's count stops at `cap`, so a wide filter costs no more than reading that many index entries. */
export async function countMessages(
  q: Queries,
  filter: MessageFilter,
  cap: number,
): Promise<{ count: number; capped: boolean }> {
  if (filter.projectIds !== null && filter.projectIds.length === 0)
    return { count: 0, capped: false };
  let count = 0;
  for (const projectId of filter.projectIds === null ? [null] : [...new Set(filter.projectIds)]) {
    const { clause, params } = where(q, filter, projectId, null);
    const row = await q.get<{ n: number | string }>(
      `SELECT COUNT(*) AS n FROM (SELECT 1 FROM messages ${clause} LIMIT @cap) AS matching`,
      { ...params, cap: cap + 1 - count },
    );
    count += Number(row?.n ?? 0);
    if (count > cap) return { count: cap, capped: true };
  }
  return { count, capped: false };
}

/** SQLite's rowid order, PostgreSQL's by id. */
function keyed<Row extends { rowid?: number; id: string }>(
  q: Queries,
  rows: Row[],
): (Row & { key: MessageKey })[] {
  if (q.dialect === 'postgres')
    return rows
      .map((r) => ({ ...r, key: r.id }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return rows
    .map((r) => ({ ...r, key: [r.rowid!, r.id] as MessageKey }))
    .sort((a, b) => a.rowid! - b.rowid!);
}

const keyColumns = (q: Queries) => (q.dialect === 'postgres' ? 'id' : 'rowid, id');

/** No ORDER BY (sorting ten thousand rows would go through a temporary file): sorted here. */
export async function matchingMessageKeys(
  q: Queries,
  filter: MessageFilter,
  limit: number,
): Promise<MessageKey[]> {
  if (filter.projectIds !== null && filter.projectIds.length === 0) return [];
  const rows: { rowid?: number; id: string }[] = [];
  for (const projectId of filter.projectIds === null ? [null] : [...new Set(filter.projectIds)]) {
    const { clause, params } = where(q, filter, projectId, null);
    rows.push(
      ...(await q.all<{ rowid?: number; id: string }>(
        `SELECT ${keyColumns(q)} FROM messages ${clause} LIMIT @limit`,
        { ...params, limit: limit - rows.length },
      )),
    );
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

export async function messageStates(q: Queries, ids: readonly string[]): Promise<MessageState[]> {
  const rows = await q.all<Omit<MessageState, 'key'> & { rowid?: number }>(
    `SELECT ${keyColumns(q)}, project_id, status, next_attempt_at FROM messages WHERE ${inJsonArray(q, 'id', '?')}`,
    JSON.stringify(ids),
  );
  return keyed(q, rows).map(({ rowid: _rowid, ...state }) => state);
}
