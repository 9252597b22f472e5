import type { ClientBase } from 'pg';
import type { AcceptanceRead, AcceptanceReadRequest } from '../acceptanceGroups.js';
import type { EventRow } from '../events.js';
import type { NewMessageRow } from '../messages.js';
import { bigintNumber } from './bigintNumber.js';

/**
 * The queries of one acceptance on PostgreSQL: the PostgreSQL twins of store/projects.ts
 * (the plan), store/idempotency.ts, store/usage.ts, store/messages.ts and store/events.ts, as
 * store/postgres/acceptanceGroups.ts runs them inside a group's transaction on one client.
 * BIGINT arrives as a string and is parsed per query (`bigintNumber`); counts are cast to int in SQL.
 */

/**
 * Locks the project's row until the transaction ends and returns its plan (null: no such
 * project). Every acceptance of a project takes this lock before it reads anything, so
 * acceptances of one project serialize on it across nodes (each reads the usage the previous
 * one committed) while other projects' run in parallel. FOR NO KEY UPDATE rather than FOR
 * UPDATE: it conflicts with itself and with any UPDATE of the row (a plan change waits for the
 * acceptances under way, and they for it), but not with the FOR KEY SHARE locks that inserts
 * referencing projects take (messages, api_keys, webhook_endpoints), so those never queue behind
 * an acceptance.
 */
export async function lockProjectForAcceptance(
  client: ClientBase,
  projectId: string,
): Promise<string | null> {
  const result = await client.query<{ plan: string }>(
    'SELECT plan FROM projects WHERE id = $1 FOR NO KEY UPDATE',
    [projectId],
  );
  return result.rows[0]?.plan ?? null;
}

interface AcceptanceReadRow {
  idempotent_response: string | null;
  sender_domain_known: boolean;
  sender_domain_count: number;
  category_known: boolean;
  category_count: number;
  month_messages: string | null;
  month_bytes: string | null;
  day_messages: string | null;
  day_bytes: string | null;
}

/**
 * Everything an acceptance judges by, in one round trip: the Idempotency-Key's first response,
 * whether the sender domain and category are known (counted only when new), this month's and
 * today's counters. Run after lockProjectForAcceptance, as a statement of its own: under READ
 * COMMITTED each statement reads from a snapshot taken when it starts, so only a statement
 * begun after the lock was granted sees what the lock's previous holder committed.
 */
export async function readAcceptanceState(
  client: ClientBase,
  request: AcceptanceReadRequest,
): Promise<AcceptanceRead> {
  const result = await client.query<AcceptanceReadRow>(
    `WITH known AS (
       SELECT $4::text IS NULL OR EXISTS (SELECT 1 FROM sender_domains WHERE project_id = $1 AND domain = $4) AS sender_domain,
              $5::text IS NULL OR EXISTS (SELECT 1 FROM categories WHERE project_id = $1 AND name = $5) AS category
     )
     SELECT (SELECT response FROM idempotency_keys WHERE project_id = $1 AND environment = $2 AND key = $3) AS idempotent_response,
            known.sender_domain AS sender_domain_known,
            CASE WHEN known.sender_domain THEN 0 ELSE (SELECT count(*)::int FROM sender_domains WHERE project_id = $1) END AS sender_domain_count,
            known.category AS category_known,
            CASE WHEN known.category THEN 0 ELSE (SELECT count(*)::int FROM categories WHERE project_id = $1) END AS category_count,
            this_month.messages AS month_messages, this_month.bytes AS month_bytes,
            today.messages AS day_messages, today.bytes AS day_bytes
       FROM known
       LEFT JOIN usage_counters this_month ON this_month.project_id = $1 AND this_month.period = $6
       LEFT JOIN usage_counters today ON today.project_id = $1 AND today.period = $7`,
    [
      request.projectId,
      request.environment,
      request.idempotencyKey,
      request.senderDomain,
      request.category,
      request.monthPeriod,
      request.dayPeriod,
    ],
  );
  const row = result.rows[0]!;
  return {
    idempotentResponse: row.idempotent_response,
    senderDomainKnown: row.sender_domain_known,
    senderDomainCount: row.sender_domain_count,
    categoryKnown: row.category_known,
    categoryCount: row.category_count,
    month: {
      messages: bigintNumber(row.month_messages ?? 0, 'usage_counters.messages'),
      bytes: bigintNumber(row.month_bytes ?? 0, 'usage_counters.bytes'),
    },
    day: {
      messages: bigintNumber(row.day_messages ?? 0, 'usage_counters.messages'),
      bytes: bigintNumber(row.day_bytes ?? 0, 'usage_counters.bytes'),
    },
  };
}

export async function registerSenderDomain(
  client: ClientBase,
  projectId: string,
  domain: string,
  now: number,
): Promise<void> {
  await client.query(
    'INSERT INTO sender_domains (project_id, domain, first_used_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
    [projectId, domain, now],
  );
}

export async function registerCategory(
  client: ClientBase,
  projectId: string,
  name: string,
  now: number,
): Promise<void> {
  await client.query(
    'INSERT INTO categories (project_id, name, first_used_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
    [projectId, name, now],
  );
}

/** One message and `bytes` more in each of `periods` (distinct), in one statement. */
export async function addUsage(
  client: ClientBase,
  projectId: string,
  periods: readonly string[],
  bytes: number,
): Promise<void> {
  if (periods.length === 0) return;
  await client.query(
    `INSERT INTO usage_counters (project_id, period, messages, bytes) SELECT $1::text, period, 1, $3::bigint FROM unnest($2::text[]) AS period
     ON CONFLICT (project_id, period) DO UPDATE SET messages = usage_counters.messages + 1, bytes = usage_counters.bytes + excluded.bytes`,
    [projectId, periods, bytes],
  );
}

const MESSAGE_COLUMNS = [
  'id',
  'project_id',
  'environment',
  'source',
  'status',
  'hold_reason',
  'from_email',
  'from_name',
  'recipients',
  'subject',
  'tags',
  'metadata',
  'category',
  'routing',
  'provider_options',
  'scheduled_at',
  'spool_path',
  'size_bytes',
  'idempotency_key',
  'created_at',
  'updated_at',
  'next_attempt_at',
] as const satisfies readonly (keyof NewMessageRow)[];

const INSERT_MESSAGE = `INSERT INTO messages (${MESSAGE_COLUMNS.join(', ')}) VALUES (${MESSAGE_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`;

export async function insertMessage(client: ClientBase, row: NewMessageRow): Promise<void> {
  await client.query(
    INSERT_MESSAGE,
    MESSAGE_COLUMNS.map((column) => row[column] ?? null),
  );
}

export async function insertIdempotencyKey(
  client: ClientBase,
  row: {
    project_id: string;
    environment: string;
    key: string;
    message_id: string;
    response: string;
    created_at: number;
  },
): Promise<void> {
  await client.query(
    'INSERT INTO idempotency_keys (project_id, environment, key, message_id, response, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [row.project_id, row.environment, row.key, row.message_id, row.response, row.created_at],
  );
}

export async function insertEvent(client: ClientBase, row: Omit<EventRow, 'seq'>): Promise<void> {
  await client.query(
    'INSERT INTO events (project_id, message_id, type, created_at, data) VALUES ($1, $2, $3, $4, $5)',
    [row.project_id, row.message_id, row.type, row.created_at, row.data],
  );
}
