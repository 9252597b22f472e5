import {
  type LimitSettings,
  type Refusal,
  recordUsage,
  type UsageFacts,
  usageRefusal,
} from '../policy/usageLimits.js';
import { type EventRow, insertEvent } from '../store/events.js';
import { findIdempotentResponse, insertIdempotencyKey } from '../store/idempotency.js';
import { insertMessageBody } from '../store/messageBodies.js';
import { insertMessage, type NewMessageRow } from '../store/messages.js';
import { projectPlan } from '../store/projects.js';
import type { Queries } from '../store/queries.js';

/** Everything one acceptance commits, as plain data (it crosses to the index writer thread). */
export interface AcceptanceRecord {
  message: NewMessageRow;
  /** The MIME, when the index keeps it (a small message; its spool_path is BODY_IN_INDEX); null: a spool file. */
  body: Uint8Array | null;
  /** The 202 body to remember under the Idempotency-Key, when one was sent. */
  idempotency: { key: string; response: string } | null;
  usage: UsageFacts;
  event: Omit<EventRow, 'seq'>;
}

export type AcceptanceOutcome =
  | { kind: 'stored' }
  | { kind: 'duplicate'; response: string }
  | { kind: 'refused'; refusal: Refusal };

/**
 * Commits one acceptance: the message row (and its body when the index keeps it), its Idempotency-Key, its usage and its
 * `mail.accepted` event. Runs inside the writer's transaction, so neither the key check nor
 * the caps and quotas (read with the project's current plan) can race another insert.
 */
export async function recordAcceptance(
  q: Queries,
  record: AcceptanceRecord,
  limits: LimitSettings,
): Promise<AcceptanceOutcome> {
  const m = record.message;
  if (record.idempotency) {
    const existing = await findIdempotentResponse(
      q,
      m.project_id,
      m.environment,
      record.idempotency.key,
    );
    if (existing) return { kind: 'duplicate', response: existing };
  }
  const plan = await projectPlan(q, m.project_id);
  const refusal = await usageRefusal(q, record.usage, plan, limits, m.created_at);
  if (refusal) return { kind: 'refused', refusal };
  await recordUsage(q, record.usage, limits, m.created_at);
  await insertMessage(q, m);
  if (record.body) await insertMessageBody(q, m.id, record.body);
  if (record.idempotency) {
    await insertIdempotencyKey(q, {
      project_id: m.project_id,
      environment: m.environment,
      key: record.idempotency.key,
      message_id: m.id,
      response: record.idempotency.response,
      created_at: m.created_at,
    });
  }
  await insertEvent(q, record.event);
  return { kind: 'stored' };
}
