import type { Pool, PoolClient } from 'pg';
import type {
  AcceptanceGroupStore,
  AcceptanceUnitWrites,
  GroupUnitResult,
} from '../acceptanceGroups.js';
import {
  addUsage,
  insertEvent,
  insertIdempotencyKey,
  insertMessage,
  lockProjectForAcceptance,
  readAcceptanceState,
  registerCategory,
  registerSenderDomain,
} from './acceptance.js';
import { BODY_CHUNK_BYTES, writeBodyChunks } from './bodyChunks.js';

/**
 * Acceptance groups on PostgreSQL, exact across nodes, that is across several pools on one
 * database committing at once. Each group is one transaction with synchronous commit (durable,
 * and on a synchronous standby if one is configured, before it resolves: only then may a 202 /
 * 250 be answered), each unit in a savepoint so one that throws rolls back alone.
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
 * A failure outside any unit (no connection, a lost one, a failed COMMIT) fails every unit: the
 * caller answers them an error, and a retry under the same Idempotency-Key is safe either way.
 */
export function postgresAcceptanceGroups(pool: Pool): AcceptanceGroupStore {
  return {
    bodyPieceBytes: BODY_CHUNK_BYTES,
    commitGroup: (units, projectOf, commitUnit) => commitGroup(pool, units, projectOf, commitUnit),
    commitRefusal: () =>
      pool.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby').then(
        (r) => (r.rows[0]?.standby ? 'the database is a standby (read-only): commits fail' : null),
        (err: Error) => `commit failed: ${err.message}`,
      ),
  };
}

type CommitUnit<Unit, Outcome> = (
  writes: AcceptanceUnitWrites,
  unit: Unit,
  planName: string,
) => Promise<Outcome>;

async function commitGroup<Unit, Outcome>(
  pool: Pool,
  units: readonly Unit[],
  projectOf: (unit: Unit) => string,
  commitUnit: CommitUnit<Unit, Outcome>,
): Promise<GroupUnitResult<Outcome>[]> {
  if (units.length === 0) return [];
  const order = units
    .map((_, index) => index)
    .sort((a, b) => compareIds(projectOf(units[a]!), projectOf(units[b]!)) || a - b);
  const results: GroupUnitResult<Outcome>[] = new Array<GroupUnitResult<Outcome>>(units.length);
  const failAll = (err: unknown) =>
    units.map(
      (): GroupUnitResult<Outcome> => ({
        ok: false,
        error: `commit failed: ${(err as Error).message}`,
      }),
    );
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
      const writes = unitWrites(client);
      let lockedProject: string | null = null;
      let planName: string | null = null;
      for (const index of order) {
        const unit = units[index]!;
        const projectId = projectOf(unit);
        if (projectId !== lockedProject) {
          planName = await lockProjectForAcceptance(client, projectId);
          lockedProject = projectId;
        }
        if (planName === null) {
          results[index] = { ok: false, error: `project ${projectId} does not exist` };
          continue;
        }
        results[index] = await commitUnitInSavepoint(client, writes, unit, planName, commitUnit);
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
async function commitUnitInSavepoint<Unit, Outcome>(
  client: PoolClient,
  writes: AcceptanceUnitWrites,
  unit: Unit,
  planName: string,
  commitUnit: CommitUnit<Unit, Outcome>,
): Promise<GroupUnitResult<Outcome>> {
  await client.query('SAVEPOINT acceptance_unit');
  try {
    const outcome = await commitUnit(writes, unit, planName);
    await client.query('RELEASE SAVEPOINT acceptance_unit');
    return { ok: true, outcome };
  } catch (err) {
    // ROLLBACK TO keeps the savepoint; released too, so units do not nest one savepoint per failure.
    await client.query('ROLLBACK TO SAVEPOINT acceptance_unit');
    await client.query('RELEASE SAVEPOINT acceptance_unit');
    return { ok: false, error: (err as Error).message };
  }
}

/** The unit's writes on the group's client (store/postgres/acceptance.ts, bodyChunks.ts). */
function unitWrites(client: PoolClient): AcceptanceUnitWrites {
  return {
    readState: (request) => readAcceptanceState(client, request),
    registerSenderDomain: (projectId, domain, now) =>
      registerSenderDomain(client, projectId, domain, now),
    registerCategory: (projectId, name, now) => registerCategory(client, projectId, name, now),
    addUsage: (projectId, periods, bytes) => addUsage(client, projectId, periods, bytes),
    insertMessage: (row) => insertMessage(client, row),
    writeBody: async (messageId, body) => {
      await writeBodyChunks(client, messageId, body);
    },
    insertIdempotencyKey: (row) => insertIdempotencyKey(client, row),
    insertEvent: (row) => insertEvent(client, row),
  };
}
