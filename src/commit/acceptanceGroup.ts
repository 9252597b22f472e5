import { Readable } from 'node:stream';
import {
  decideUsage,
  type LimitSettings,
  planFor,
  usageReads,
  usageWrites,
} from '../policy/usageLimits.js';
import type {
  AcceptanceGroupStore,
  AcceptanceUnitWrites,
  GroupUnitResult,
} from '../store/acceptanceGroups.js';
import { dayPeriod, monthPeriod } from '../store/usage.js';
import type { AcceptanceOutcome, AcceptanceRecord } from './acceptance.js';

/** The group-commit twin of recordAcceptance (acceptance.ts), judged by the same rules under the project's lock. */
export interface GroupAcceptanceUnit {
  record: AcceptanceRecord;
  /** Opened when the unit's turn comes and written as it is read, never whole. */
  openBody?: () => Readable;
}

export type GroupAcceptanceResult = GroupUnitResult<AcceptanceOutcome>;

export function commitAcceptanceGroup(
  groups: AcceptanceGroupStore,
  units: readonly GroupAcceptanceUnit[],
  limits: LimitSettings,
): Promise<GroupAcceptanceResult[]> {
  return groups.commitGroup(
    units,
    (unit) => unit.record.message.project_id,
    (store, unit, planName) => commitUnit(store, unit, planName, limits),
  );
}

/** What recordAcceptance commits, in the same order, judged by the same rule. */
async function commitUnit(
  store: AcceptanceUnitWrites,
  unit: GroupAcceptanceUnit,
  planName: string,
  limits: LimitSettings,
): Promise<AcceptanceOutcome> {
  const { record } = unit;
  const m = record.message;
  const now = m.created_at;
  const plan = planFor(limits, planName);
  const reads = usageReads(record.usage, plan, limits);
  const state = await store.readState({
    projectId: m.project_id,
    environment: m.environment,
    idempotencyKey: record.idempotency?.key ?? null,
    senderDomain: reads.senderDomain ? record.usage.senderDomain : null,
    category: reads.category ? record.usage.category : null,
    monthPeriod: reads.month ? monthPeriod(now) : null,
    dayPeriod: reads.day ? dayPeriod(now) : null,
  });
  if (state.idempotentResponse !== null)
    return { kind: 'duplicate', response: state.idempotentResponse };
  const refusal = decideUsage(record.usage, state, plan, limits, now);
  if (refusal) return { kind: 'refused', refusal };
  const writes = usageWrites(record.usage, limits, now);
  if (writes.senderDomain !== null)
    await store.registerSenderDomain(m.project_id, writes.senderDomain, now);
  if (writes.category !== null) await store.registerCategory(m.project_id, writes.category, now);
  await store.addUsage(m.project_id, writes.periods, writes.bytes);
  await store.insertMessage(m);
  const body = unit.openBody
    ? unit.openBody()
    : record.body
      ? Readable.from([heldBytes(record.body)], { objectMode: false })
      : null;
  if (body) {
    try {
      await store.writeBody(m.id, body);
    } finally {
      // A stream left half read would hold its file open.
      body.destroy();
    }
  }
  if (record.idempotency) {
    await store.insertIdempotencyKey({
      project_id: m.project_id,
      environment: m.environment,
      key: record.idempotency.key,
      message_id: m.id,
      response: record.idempotency.response,
      created_at: now,
    });
  }
  await store.insertEvent(record.event);
  return { kind: 'stored' };
}

/** One that crossed a MessagePort arrives as a bare Uint8Array. */
function heldBytes(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
