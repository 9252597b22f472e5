import type { ClientBase } from 'pg';
import type {
  AcceptanceRead,
  AcceptanceReadRequest,
  AcceptanceUnitRows,
} from '../acceptanceGroups.js';
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
  suppressed: string[];
}

/**
 * Everything an acceptance judges by, in one round trip: the Idempotency-Key's first response,
 * the suppressed recipients, whether the sender domain and category are known (counted only
 * when new), this month's and today's counters. Run after lockProjectForAcceptance, as a
 * statement of its own: under READ COMMITTED each statement reads from a snapshot taken when it
 * starts, so only a statement begun after the lock was granted sees what the lock's previous
 * holder committed.
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
            today.messages AS day_messages, today.bytes AS day_bytes,
            ARRAY(SELECT r.email FROM unnest($8::text[]) WITH ORDINALITY AS r(email, n)
                   WHERE EXISTS (SELECT 1 FROM suppressions s WHERE s.project_id = $1 AND s.email = r.email::citext) ORDER BY r.n) AS suppressed
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
      request.recipients,
    ],
  );
  const row = result.rows[0]!;
  return {
    idempotentResponse: row.idempotent_response,
    suppressed: row.suppressed,
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

/** `$n` of the parameters after the message's columns (writeAcceptedUnit's order). */
const after = (n: number) => `$${MESSAGE_COLUMNS.length + n}`;
const [MESSAGE_ID, PROJECT_ID, ENVIRONMENT] = ['$1', '$2', '$3'];
const [
  DOMAIN,
  CATEGORY,
  PERIODS,
  BYTES,
  NOW,
  PIECE,
  KEY,
  RESPONSE,
  EVENT_PROJECT,
  EVENT_MESSAGE,
  EVENT_TYPE,
  EVENT_AT,
  EVENT_DATA,
] = Array.from({ length: 13 }, (_, i) => after(i + 1));

/**
 * An accepted unit's rows in one statement (one round trip while its project's row is locked,
 * where one per table took six): the sender domain and category if new, the usage counters, the
 * message row, its body when it is one piece, its Idempotency-Key and its event. Each is a
 * data-modifying WITH of its own; they touch different tables, so none needs another's effect.
 */
const WRITE_UNIT = `
  WITH domain AS (
    INSERT INTO sender_domains (project_id, domain, first_used_at)
    SELECT ${PROJECT_ID}, d, ${NOW}::bigint FROM (SELECT ${DOMAIN}::text AS d) AS given WHERE d IS NOT NULL ON CONFLICT DO NOTHING
  ), category AS (
    INSERT INTO categories (project_id, name, first_used_at)
    SELECT ${PROJECT_ID}, c, ${NOW}::bigint FROM (SELECT ${CATEGORY}::text AS c) AS given WHERE c IS NOT NULL ON CONFLICT DO NOTHING
  ), usage AS (
    INSERT INTO usage_counters (project_id, period, messages, bytes)
    SELECT ${PROJECT_ID}, period, 1, ${BYTES}::bigint FROM unnest(${PERIODS}::text[]) AS period
    ON CONFLICT (project_id, period) DO UPDATE SET messages = usage_counters.messages + 1, bytes = usage_counters.bytes + excluded.bytes
  ), message AS (
    INSERT INTO messages (${MESSAGE_COLUMNS.join(', ')}) VALUES (${MESSAGE_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})
  ), body AS (
    INSERT INTO message_body_chunks (message_id, seq, bytes) SELECT ${MESSAGE_ID}, 0, p FROM (SELECT ${PIECE}::bytea AS p) AS given WHERE p IS NOT NULL
  ), idempotency AS (
    INSERT INTO idempotency_keys (project_id, environment, key, message_id, response, created_at)
    SELECT ${PROJECT_ID}, ${ENVIRONMENT}, k, ${MESSAGE_ID}, ${RESPONSE}::text, ${NOW}::bigint FROM (SELECT ${KEY}::text AS k) AS given WHERE k IS NOT NULL
  )
  INSERT INTO events (project_id, message_id, type, created_at, data)
  VALUES (${EVENT_PROJECT}::text, ${EVENT_MESSAGE}::text, ${EVENT_TYPE}::text, ${EVENT_AT}::bigint, ${EVENT_DATA}::text)`;

export async function writeAcceptedUnit(
  client: ClientBase,
  rows: AcceptanceUnitRows,
): Promise<void> {
  const { message, event } = rows;
  await client.query(WRITE_UNIT, [
    ...MESSAGE_COLUMNS.map((column) => message[column] ?? null),
    rows.senderDomain,
    rows.category,
    rows.periods,
    rows.bytes,
    message.created_at,
    rows.body,
    rows.idempotency?.key ?? null,
    rows.idempotency?.response ?? null,
    event.project_id,
    event.message_id,
    event.type,
    event.created_at,
    event.data,
  ]);
}
