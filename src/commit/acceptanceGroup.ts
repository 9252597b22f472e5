import { Readable } from 'node:stream';
import { suppressedRefusal, suppressionCandidates } from '../policy/projectPolicy.js';
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
    (store, unit, planName) => commitUnit(store, unit, planName, limits, groups.bodyPieceBytes),
  );
}

/** What recordAcceptance commits, in the same order, judged by the same rule. */
async function commitUnit(
  store: AcceptanceUnitWrites,
  unit: GroupAcceptanceUnit,
  planName: string,
  limits: LimitSettings,
  pieceBytes: number,
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
    recipients: limits.enabled ? suppressionCandidates(recipientsOf(m.recipients)) : null,
  });
  if (state.idempotentResponse !== null)
    return { kind: 'duplicate', response: state.idempotentResponse };
  // The pipeline leaves the suppressions to this read (AcceptanceCommits.precheck): their refusal
  // comes first, as checkProjectPolicy's before the caps.
  const refusal =
    suppressedRefusal(state.suppressed) ?? decideUsage(record.usage, state, plan, limits, now);
  if (refusal) return { kind: 'refused', refusal };
  const writes = usageWrites(record.usage, limits, now);
  const held = unit.openBody || !record.body ? null : heldBytes(record.body);
  // A held body of one piece goes with the rows; a larger one, or a file's, is written after them in pieces.
  const inline = held !== null && held.length <= pieceBytes ? held : null;
  await store.writeUnit({
    message: m,
    body: inline,
    idempotency: record.idempotency,
    event: record.event,
    senderDomain: writes.senderDomain,
    category: writes.category,
    periods: writes.periods,
    bytes: writes.bytes,
  });
  const body = unit.openBody
    ? unit.openBody()
    : held !== null && inline === null
      ? Readable.from([held], { objectMode: false })
      : null;
  if (body) {
    try {
      await store.writeBody(m.id, body);
    } finally {
      // A stream left half read would hold its file open.
      body.destroy();
    }
  }
  return { kind: 'stored' };
}

/** Every recipient of a message row's `recipients` ({to, cc, bcc}, as the pipeline writes it). */
function recipientsOf(json: string): string[] {
  const { to, cc, bcc } = JSON.parse(json) as { to: string[]; cc: string[]; bcc: string[] };
  return [...to, ...cc, ...bcc];
}

/** One that crossed a MessagePort arrives as a bare Uint8Array. */
function heldBytes(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
