import type { Pool, PoolClient } from 'pg';
import type {
  AcceptanceGroupStore,
  AcceptanceUnitWrites,
  GroupUnitResult,
} from '../acceptanceGroups.js';
import { lockProjectForAcceptance, readAcceptanceState, writeAcceptedUnit } from './acceptance.js';
import { BODY_CHUNK_BYTES, writeBodyChunks } from './bodyChunks.js';
import { pgDriver } from './driver.js';

/**
 * Acceptance groups on PostgreSQL, exact across nodes, that is across several pools on one
 * database committing at once. Each group is one transaction with synchronous commit (durable,
 * and on a synchronous standby if one is configured, before it resolves: only then may a 202 /
 * 250 be answered).
 *
 * Exactness across nodes: a unit runs under its project's row lock (lockProjectForAcceptance),
 * taken before it reads anything and held to the commit, so the Idempotency-Key check, the caps
 * and quotas and the usage counters of one project are read and moved by one transaction at a
 * time in the whole cluster; the key's primary key and the counters' upsert are the backstops.
 * A unit holds it for two round trips: its one read and its one write (writeAcceptedUnit), and
 * a body too big for one piece.
 *
 * Lock order: a group may hold several projects, and two groups taking the same two projects
 * in opposite orders would deadlock. So units are visited sorted by project id (stably: one
 * project's units keep their order, and different projects share nothing the commit reads),
 * and each project is locked once, in the group's transaction itself, before its first unit.
 * Every transaction thus takes its locks in ascending order, so no cycle can form.
 *
 * A unit that fails for its own reason (a message id already taken, a body's file unreadable:
 * ofTheUnit) fails alone: the transaction is rolled back and the group runs again without it, in
 * a new one. No savepoint per unit (two round trips more each, while the lock is held), for a
 * failure that does not happen in the normal course; each run drops one unit, so a group of n
 * runs at most n + 1 times.
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

/** How one run of a group ended: committed (each unit's result), or one unit threw and the transaction was rolled back. */
type Run<Outcome> =
  | { committed: true; results: Map<number, GroupUnitResult<Outcome>> }
  | { committed: false; failed: number; error: string };

async function commitGroup<Unit, Outcome>(
  pool: Pool,
  units: readonly Unit[],
  projectOf: (unit: Unit) => string,
  commitUnit: CommitUnit<Unit, Outcome>,
): Promise<GroupUnitResult<Outcome>[]> {
  if (units.length === 0) return [];
  let order = units
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
    for (;;) {
      let run: Run<Outcome>;
      try {
        run = await runGroup(client, units, order, projectOf, commitUnit);
      } catch (err) {
        await client.query('ROLLBACK').catch((rollbackErr: Error) => (broken = rollbackErr));
        return failAll(err);
      }
      if (run.committed) {
        for (const [index, result] of run.results) results[index] = result;
        return results;
      }
      results[run.failed] = { ok: false, error: run.error };
      order = order.filter((index) => index !== run.failed);
      if (order.length === 0) return results;
    }
  } finally {
    // A connection that cannot even roll back is not given back to the pool.
    client.release(broken);
  }
}

/**
 * One transaction over the units at `order`; throws when the transaction fails outside a unit.
 * A unit that throws rolls the transaction back (its rollback failing is a failure outside).
 */
async function runGroup<Unit, Outcome>(
  client: PoolClient,
  units: readonly Unit[],
  order: readonly number[],
  projectOf: (unit: Unit) => string,
  commitUnit: CommitUnit<Unit, Outcome>,
): Promise<Run<Outcome>> {
  // One round trip. Per transaction: a server (or role) configured with synchronous_commit off
  // must not make a 202 a promise it cannot keep.
  await client.query('BEGIN; SET LOCAL synchronous_commit = on');
  const writes = unitWrites(client);
  const results = new Map<number, GroupUnitResult<Outcome>>();
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
      results.set(index, { ok: false, error: `project ${projectId} does not exist` });
      continue;
    }
    try {
      results.set(index, { ok: true, outcome: await commitUnit(writes, unit, planName) });
    } catch (err) {
      if (!ofTheUnit(err)) throw err;
      await client.query('ROLLBACK');
      return { committed: false, failed: index, error: (err as Error).message };
    }
  }
  await client.query('COMMIT');
  return { committed: true, results };
}

/**
 * SQLSTATE classes of a failure that is the database's, not a unit's: the connection (08), the
 * transaction's state (25: read-only, a standby), a rollback forced on it (40), resources such as
 * disk space (53), an operator's intervention such as a shutdown (57), the system (58) and
 * internal errors (XX). Every unit in turn would fail the same way: the group fails at once.
 */
const DATABASE_FAILURES = new Set(['08', '25', '40', '53', '57', '58', 'XX']);

/**
 * Whether a unit's failure is its own (the contract's persistence failure for that element):
 * anything the database refused of its rows (a constraint, text it cannot hold, a trigger's
 * exception), or a failure outside the database (its body's file unreadable).
 */
function ofTheUnit(err: unknown): boolean {
  return (
    !(err instanceof pgDriver().DatabaseError) ||
    !DATABASE_FAILURES.has(err.code?.slice(0, 2) ?? '')
  );
}

/** Project ids compared by their bytes (the C collation's order; any one total order will do, the same on every node). */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The unit's reads and writes on the group's client (store/postgres/acceptance.ts, bodyChunks.ts). */
function unitWrites(client: PoolClient): AcceptanceUnitWrites {
  return {
    readState: (request) => readAcceptanceState(client, request),
    writeUnit: (rows) => writeAcceptedUnit(client, rows),
    writeBody: async (messageId, body) => {
      await writeBodyChunks(client, messageId, body);
    },
  };
}
