/**
 * The acceptance commit on PostgreSQL: the twin of recordAcceptance (commit/acceptance.ts) and
 * of the index writer's group transaction, exact across nodes, that is across several pools on
 * one database committing at once. Not yet wired to the server (issue 23).
 *
 * It lives in commit/, beside its SQLite twin, rather than in store/postgres/: it judges by the
 * policy layer's rules (decideUsage), and the store is a leaf that imports no policy. Its SQL
 * is in store/postgres/acceptance.ts and store/postgres/bodyChunks.ts.
 */
import type { Pool, PoolClient } from 'pg';
import { Readable } from 'node:stream';
import { decideUsage, planFor, usageReads, usageWrites, type LimitSettings } from '../policy/usageLimits.js';
import {
  addUsage, insertEvent, insertIdempotencyKey, insertMessage, lockProjectForAcceptance, readAcceptanceState, registerCategory,
  registerSenderDomain,
} from '../store/postgres/acceptance.js';
import { writeBodyChunks } from '../store/postgres/bodyChunks.js';
import { dayPeriod, monthPeriod } from '../store/usage.js';
import type { AcceptanceOutcome, AcceptanceRecord } from './acceptance.js';

export interface PostgresAcceptanceUnit {
  record: AcceptanceRecord;
  /**
   * A body too big to hold (a temp file, a stream): opened when the unit's turn comes and
   * written to message_body_chunks as it is read, never whole. Without it, `record.body` (held)
   * is written, if any.
   */
  openBody?: () => Readable;
}

/** Per unit, in the order given: its outcome, or why it failed (it was rolled back alone, or the whole group was). */
export type PostgresUnitResult = { ok: true; outcome: AcceptanceOutcome } | { ok: false; error: string };

/**
 * Commits a group of acceptances in one transaction with synchronous commit (durable, and on a
 * synchronous standby if one is configured, before this resolves: only then may a 202 / 250 be
 * answered), each unit in a savepoint so one that throws rolls back alone.
 *
 * Exactness across nodes: a unit runs under its project's row lock (lockProjectForAcceptance),
 * taken before it reads anything and held to the commit, so the Idempotency-Key check, the caps
 * and quotas and the usage counters of one project are read and moved by one transaction at a
 * time in the whole cluster; the key's primary key and the counters' upsert are the backstops.
 *
 * Lock order: a group may hold several projects, and two groups taking the same two projects
 * in opposite orders would deadlock. So units are visited sorted by project id (stably: one
 * project's units keep their order, and different projects share nothing the commit reads),
 * and each project is locked once, in the group's transaction itself, before its first unit's
 * savepoint. Every transaction thus takes its locks in ascending order, so no cycle can form;
 * and the lock cannot be lost to a unit's rollback (a row lock taken inside a savepoint that
 * rolls back is released), which would let another node read counters this group has moved but
 * not yet committed.
 *
 * A failure outside any unit (no connection, a lost one, a failed COMMIT) fails every unit: the caller
 * answers them an error, and a retry under the same Idempotency-Key is safe either way.
 */
export async function commitAcceptanceGroup(pool: Pool, units: readonly PostgresAcceptanceUnit[], limits: LimitSettings): Promise<PostgresUnitResult[]> {
  if (units.length === 0) return [];
  const order = units.map((_, index) => index).sort((a, b) => compareIds(units[a]!.record.message.project_id, units[b]!.record.message.project_id) || a - b);
  const results: PostgresUnitResult[] = new Array<PostgresUnitResult>(units.length);
  const failAll = (err: unknown) => units.map((): PostgresUnitResult => ({ ok: false, error: `commit failed: ${(err as Error).message}` }));
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    return failAll(err);
  }
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    try {
      // Per transaction: a server (or role) configured with synchronous_commit off must not make a 202 a promise it cannot keep.
      await client.query('SET LOCAL synchronous_commit = on');
      let lockedProject: string | null = null;
      let planName: string | null = null;
      for (const index of order) {
        const unit = units[index]!;
        const projectId = unit.record.message.project_id;
        if (projectId !== lockedProject) {
          planName = await lockProjectForAcceptance(client, projectId);
          lockedProject = projectId;
        }
        if (planName === null) {
          results[index] = { ok: false, error: `project ${projectId} does not exist` };
          continue;
        }
        results[index] = await commitUnitInSavepoint(client, unit, planName, limits);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackErr: Error) => (broken = rollbackErr));
      return failAll(err);
    }
  } finally {
    // A connection that cannot even roll back is not given back to the pool.
    client.release(broken);
  }
  return results;
}

/** Project ids compared by their bytes (the C collation's order; any one total order will do, the same on every node). */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One unit in its savepoint: a unit that throws is rolled back alone and reported; a failing rollback fails the group. */
async function commitUnitInSavepoint(client: PoolClient, unit: PostgresAcceptanceUnit, planName: string, limits: LimitSettings): Promise<PostgresUnitResult> {
  await client.query('SAVEPOINT acceptance_unit');
  try {
    const outcome = await commitUnit(client, unit, planName, limits);
    await client.query('RELEASE SAVEPOINT acceptance_unit');
    return { ok: true, outcome };
  } catch (err) {
    // ROLLBACK TO keeps the savepoint; released too, so units do not nest one savepoint per failure.
    await client.query('ROLLBACK TO SAVEPOINT acceptance_unit');
    await client.query('RELEASE SAVEPOINT acceptance_unit');
    return { ok: false, error: (err as Error).message };
  }
}

/** What recordAcceptance commits on SQLite, in the same order, judged by the same rule; the project is locked. */
async function commitUnit(client: PoolClient, unit: PostgresAcceptanceUnit, planName: string, limits: LimitSettings): Promise<AcceptanceOutcome> {
  const { record } = unit;
  const m = record.message;
  const now = m.created_at;
  const plan = planFor(limits, planName);
  const reads = usageReads(record.usage, plan, limits);
  const state = await readAcceptanceState(client, {
    projectId: m.project_id,
    environment: m.environment,
    idempotencyKey: record.idempotency?.key ?? null,
    senderDomain: reads.senderDomain ? record.usage.senderDomain : null,
    category: reads.category ? record.usage.category : null,
    monthPeriod: reads.month ? monthPeriod(now) : null,
    dayPeriod: reads.day ? dayPeriod(now) : null,
  });
  if (state.idempotentResponse !== null) return { kind: 'duplicate', response: state.idempotentResponse };
  const refusal = decideUsage(record.usage, state, plan, limits, now);
  if (refusal) return { kind: 'refused', refusal };
  const writes = usageWrites(record.usage, limits, now);
  if (writes.senderDomain !== null) await registerSenderDomain(client, m.project_id, writes.senderDomain, now);
  if (writes.category !== null) await registerCategory(client, m.project_id, writes.category, now);
  await addUsage(client, m.project_id, writes.periods, writes.bytes);
  await insertMessage(client, m);
  const body = unit.openBody ? unit.openBody() : record.body ? Readable.from([heldBytes(record.body)], { objectMode: false }) : null;
  if (body) {
    try {
      await writeBodyChunks(client, m.id, body);
    } finally {
      // A stream left half read (the insert failed) would hold its file open.
      body.destroy();
    }
  }
  if (record.idempotency) {
    await insertIdempotencyKey(client, {
      project_id: m.project_id,
      environment: m.environment,
      key: record.idempotency.key,
      message_id: m.id,
      response: record.idempotency.response,
      created_at: now,
    });
  }
  await insertEvent(client, record.event);
  return { kind: 'stored' };
}

/** A held body as a Buffer over the same memory (one that crossed a MessagePort arrives as a bare Uint8Array). */
function heldBytes(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
