/**
 * Every writer of a message's status against the transition table (src/contract/messageStates.ts),
 * on the suites' store (SQLite, or PostgreSQL with POSTERN_TEST_STORE=postgres): each writer is
 * run on one message in each of the twelve statuses, and for every (from, to) pair the move it
 * made (or refused) must be the table's for its cause. A refusal changes nothing. The writers
 * are the ones the server runs: the operator layer (one message, bulk by ids and by filter,
 * project resume, delete), the delivery bookkeeping (lease, PostgreSQL's reclaim, hand-off outcome, expiry), provider
 * feedback, start-up's reconciliation and retention.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type pg from 'pg';
import { ManualClock } from '../../src/clock.js';
import { applyDeliveryBookkeeping } from '../../src/commit/deliveryBookkeeping.js';
import { applyFeedbackBookkeeping } from '../../src/commit/feedbackBookkeeping.js';
import { buildConfig } from '../../src/config/load.js';
import {
  type Cause,
  MESSAGE_STATUSES,
  type MessageStatus,
  type RemovalCause,
  removableFrom,
  type TargetOf,
  TRANSITIONS,
  type TransitionCause,
} from '../../src/contract/messageStates.js';
import { silentLogger } from '../../src/log.js';
import { bulkMessageAction } from '../../src/operator/bulk.js';
import type { OperatorContext } from '../../src/operator/context.js';
import { OperatorError } from '../../src/operator/errors.js';
import { deleteMessage, messageAction } from '../../src/operator/messages.js';
import { setPaused } from '../../src/operator/projects.js';
import { type Db, openDatabase } from '../../src/store/db.js';
import { leaseDueMessages } from '../../src/store/delivery.js';
import { raiseMessageStatus } from '../../src/store/feedback.js';
import {
  applyMessageAction,
  deleteCapturedMessage,
  type MessageAction,
} from '../../src/store/messageActions.js';
import { pruneFinishedMessageRows } from '../../src/store/messageRetention.js';
import {
  failForMissingSpoolFile,
  type HoldReason,
  insertMessage,
  statusIn,
} from '../../src/store/messages.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { insertProject } from '../../src/store/projects.js';
import { type Queries, sqliteQueries } from '../../src/store/queries.js';
import { tempDirs } from '../support/hooks.js';
import { databaseFor, dropDatabaseFor, testPool, testStore } from '../support/postgres.js';

const T1 = Date.parse('2026-11-20T12:00:00.000Z');
/** Every message starts last changed at T0; a writer that moves it stamps T1. */
const T0 = T1 - 60_000;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const NODE = 'node-1';

/** The columns a run sets on its twelve messages, besides the status. */
interface Setup {
  hold_reason?: HoldReason;
  scheduled_at?: number | null;
  next_attempt_at?: number | null;
  lease_until?: number | null;
  lease_owner?: string | null;
  created_at?: number;
}

/** A writer run over one message in each status; `apply` gets their ids by status. */
interface Run {
  cause: Cause;
  writer: string;
  /** A writer only PostgreSQL runs (its SQL is PostgreSQL's). */
  postgresOnly?: boolean;
  setup?: Setup;
  apply(ids: Map<MessageStatus, string>): Promise<void>;
}

const makeDir = tempDirs('postern-states-');
const stateDir = makeDir();
let q: Queries;
let db: Db | null = null;
let pool: pg.Pool | null = null;
let ctx: OperatorContext;
let serial = 0;

before(async () => {
  if (testStore() === 'postgres') {
    pool = testPool((await databaseFor(stateDir)).url, 4);
    await migratePostgres(pool, silentLogger());
    q = postgresQueries(pool);
  } else {
    db = openDatabase(stateDir, silentLogger());
    q = sqliteQueries(db);
  }
  const config = buildConfig(
    {
      state_dir: stateDir,
      listeners: [
        {
          name: 'http-production',
          protocol: 'http',
          environment: 'production',
          host: '127.0.0.1',
          port: 0,
        },
      ],
    },
    {},
  );
  ctx = { store: q, clock: new ManualClock(T1), config, spoolRoot: path.join(stateDir, 'spool') };
  await insertProject(q, { id: 'p.states', name: 'states', plan: 'pro', created_at: T0 });
});

after(async () => {
  db?.close();
  await pool?.end();
  await dropDatabaseFor(stateDir);
});

/** Empties the messages (and what hangs off them): the lease, expiry and retention take whatever qualifies in the whole store. */
async function clearMessages(): Promise<void> {
  for (const table of [
    'attempts',
    'recipient_outcomes',
    'events',
    'suppressions',
    'feedback_receipts',
    'message_bodies',
  ])
    await q.run(`DELETE FROM ${table}`);
  if (q.dialect === 'postgres') await q.run('DELETE FROM message_body_chunks');
  await q.run('DELETE FROM messages');
}

/** One message in each status, as `setup` says, last changed at T0. */
async function twelveMessages(setup: Setup): Promise<Map<MessageStatus, string>> {
  await clearMessages();
  serial++;
  const ids = new Map<MessageStatus, string>();
  for (const [i, status] of MESSAGE_STATUSES.entries()) {
    const id = `m.states${serial}x${i}`;
    await insertMessage(q, {
      id,
      project_id: 'p.states',
      environment: status === 'captured' ? 'sandbox' : 'production',
      source: 'http',
      status,
      hold_reason:
        setup.hold_reason !== undefined
          ? setup.hold_reason
          : status === 'paused'
            ? 'request'
            : null,
      from_email: 'app@app.example',
      recipients: JSON.stringify({ to: ['ann@example.org'], cc: [], bcc: [] }),
      subject: `states ${serial}`,
      tags: '[]',
      metadata: '{}',
      category: null,
      routing: '{}',
      provider_options: null,
      scheduled_at: setup.scheduled_at ?? null,
      spool_path: `2026/11/20/${id}.eml`,
      size_bytes: 100,
      idempotency_key: null,
      created_at: setup.created_at ?? T1 - MINUTE,
      updated_at: T0,
      next_attempt_at: setup.next_attempt_at ?? null,
    });
    await q.run(
      'UPDATE messages SET lease_until = ?, lease_owner = ? WHERE id = ?',
      setup.lease_until ?? null,
      setup.lease_owner ?? null,
      id,
    );
    ids.set(status, id);
  }
  return ids;
}

/** Runs `write` for each message, one at a time; a refusal (an operator's conflict) is the writer saying no. */
async function eachMessage(
  ids: Map<MessageStatus, string>,
  write: (id: string) => Promise<unknown>,
): Promise<void> {
  for (const id of ids.values()) {
    try {
      await write(id);
    } catch (err) {
      if (!(err instanceof OperatorError)) throw err;
    }
  }
}

const scheduledAhead: Setup = { scheduled_at: T1 + HOUR };

function operatorActionRuns(action: MessageAction, setups: Setup[]): Run[] {
  return setups.flatMap((setup): Run[] => [
    {
      cause: action,
      writer: 'store applyMessageAction',
      setup,
      apply: async (ids) =>
        void (await applyMessageAction(q, action, { ids: [...ids.values()] }, T1)),
    },
    {
      cause: action,
      writer: `operator message ${action}`,
      setup,
      apply: (ids) => eachMessage(ids, (id) => messageAction(ctx, action, id)),
    },
    {
      cause: action,
      writer: `operator bulk ${action} (ids)`,
      setup,
      apply: async (ids) =>
        void (await bulkMessageAction(ctx, action, { ids: [...ids.values()] }, null)),
    },
    {
      cause: action,
      writer: `operator bulk ${action} (filter)`,
      setup,
      apply: async () =>
        void (await bulkMessageAction(ctx, action, { filter: { projectIds: ['p.states'] } }, null)),
    },
  ]);
}

const HAND_OFF_ENDS: TargetOf<'hand_off'>[] = ['sent', 'queued', 'failed', 'suppressed'];
const FEEDBACK: {
  kind: 'delivered' | 'hard_bounce' | 'complaint' | 'failed';
  raises: TargetOf<'provider_feedback'>;
}[] = [
  { kind: 'delivered', raises: 'delivered' },
  { kind: 'hard_bounce', raises: 'bounced' },
  { kind: 'complaint', raises: 'complained' },
  { kind: 'failed', raises: 'failed' },
];

const RUNS: Run[] = [
  ...operatorActionRuns('release', [{}, scheduledAhead]),
  ...operatorActionRuns('cancel', [{}, scheduledAhead]),
  ...operatorActionRuns('retry', [{ next_attempt_at: T1 + MINUTE }]),
  ...[
    { hold_reason: 'project' as const },
    { hold_reason: 'project' as const, ...scheduledAhead },
  ].map(
    (setup): Run => ({
      cause: 'project_resume',
      writer: 'operator project resume',
      setup,
      apply: async () => void (await setPaused(ctx, 'p.states', false)),
    }),
  ),
  {
    cause: 'lease',
    writer: 'store leaseDueMessages (due)',
    setup: { next_attempt_at: T1 - 1 },
    apply: async () =>
      void (await q.transaction((tx) =>
        applyDeliveryBookkeeping(tx, {
          writes: [],
          expire: null,
          lease: { node: NODE, now: T1, leaseUntil: T1 + MINUTE, limit: 100 },
          reclaim: null,
        }),
      )),
  },
  {
    cause: 'lease_reclaimed',
    writer: "delivery bookkeeping reclaim (the node's own leases it holds no hand-off for)",
    postgresOnly: true,
    setup: { lease_until: T1 + MINUTE, lease_owner: NODE },
    apply: async () =>
      void (await q.transaction((tx) =>
        applyDeliveryBookkeeping(tx, {
          writes: [],
          expire: null,
          lease: null,
          reclaim: { node: NODE, now: T1, leaseUntil: T1 + 2 * MINUTE, holding: [] },
        }),
      )),
  },
  {
    cause: 'lease_expired',
    writer: 'store leaseDueMessages (lease ran out)',
    setup: { lease_until: T1 - 1, lease_owner: 'node-gone' },
    apply: async () => void (await leaseDueMessages(q, T1, T1 + MINUTE, 100, NODE)),
  },
  ...HAND_OFF_ENDS.map(
    (status): Run => ({
      cause: 'hand_off',
      writer: 'delivery bookkeeping finish',
      setup: { lease_until: T1 + MINUTE, lease_owner: NODE },
      apply: (ids) =>
        q.transaction(async (tx) => {
          const writes = [...ids.values()].map((id) => ({
            kind: 'finish' as const,
            id,
            to: { status, next_attempt_at: null, last_error: null },
            at: T1,
            event: null,
            node: NODE,
            records: [],
          }));
          await applyDeliveryBookkeeping(tx, { writes, expire: null, lease: null, reclaim: null });
        }),
    }),
  ),
  {
    cause: 'expire',
    writer: 'delivery bookkeeping expiry sweep',
    setup: { created_at: T1 - 2 * HOUR },
    apply: async () =>
      void (await q.transaction((tx) =>
        applyDeliveryBookkeeping(tx, {
          writes: [],
          expire: { createdBefore: T1 - HOUR, at: T1, limit: 100 },
          lease: null,
          reclaim: null,
        }),
      )),
  },
  ...FEEDBACK.map(
    ({ kind }): Run => ({
      cause: 'provider_feedback',
      writer: 'feedback bookkeeping',
      apply: (ids) =>
        q.transaction(async (tx) => {
          const items = [...ids.values()].map((id) => ({
            receiptKey: `${kind}-${id}`,
            kind,
            providerMessageId: null,
            messageId: id,
            recipient: 'ann@example.org',
            occurredAt: T1,
            detail: {},
          }));
          await applyFeedbackBookkeeping(tx, {
            account: { id: 'pa.states', project_id: 'p.states', slug: 'smtp' },
            items,
            now: T1,
            onceKeys: [],
          });
        }),
    }),
  ),
  {
    cause: 'spool_file_missing',
    writer: 'store failForMissingSpoolFile',
    apply: (ids) => eachMessage(ids, (id) => failForMissingSpoolFile(q, id, T1)),
  },
  {
    cause: 'delete',
    writer: 'operator message delete',
    apply: (ids) => eachMessage(ids, (id) => deleteMessage(ctx, id)),
  },
  {
    cause: 'delete',
    writer: 'store deleteCapturedMessage',
    apply: (ids) => eachMessage(ids, (id) => q.transaction((tx) => deleteCapturedMessage(tx, id))),
  },
  {
    cause: 'retention',
    writer: 'store pruneFinishedMessageRows',
    setup: { created_at: T1 - 10 * 24 * HOUR },
    apply: async () => void (await pruneFinishedMessageRows(q, T1, 1, 100)),
  },
];

/** What one writer did over all its runs: the moves it made ("from to"), and the statuses it removed a message from. */
interface Seen {
  moves: Set<string>;
  removed: Set<MessageStatus>;
}

describe(`every writer of a message's status moves it only as the transition table says (${testStore()})`, () => {
  const seen = new Map<string, Seen & { cause: Cause }>();

  before(async () => {
    for (const run of RUNS) {
      if (run.postgresOnly && testStore() !== 'postgres') continue;
      const ids = await twelveMessages(run.setup ?? {});
      await run.apply(ids);
      const rows = new Map(
        (
          await q.all<{ id: string; status: MessageStatus; updated_at: number }>(
            'SELECT id, status, updated_at FROM messages',
          )
        ).map((r) => [r.id, r]),
      );
      const key = `${run.cause}: ${run.writer}`;
      const entry = seen.get(key) ?? {
        cause: run.cause,
        moves: new Set<string>(),
        removed: new Set<MessageStatus>(),
      };
      for (const [from, id] of ids) {
        const row = rows.get(id);
        if (!row) entry.removed.add(from);
        else if (row.status !== from || Number(row.updated_at) !== T0)
          entry.moves.add(`${from} ${row.status}`);
      }
      seen.set(key, entry);
    }
  });

  test("every (from, to) pair, for every writer: moved exactly when the table allows it by the writer's cause, otherwise left as it was", () => {
    const wrong: string[] = [];
    for (const [writer, s] of seen) {
      if (s.cause === 'delete' || s.cause === 'retention') continue;
      const cause: TransitionCause = s.cause;
      for (const from of MESSAGE_STATUSES) {
        for (const to of MESSAGE_STATUSES) {
          const allowed = TRANSITIONS.some(
            (t) => t.cause === cause && t.from === from && t.to === to,
          );
          const moved = s.moves.has(`${from} ${to}`);
          if (allowed !== moved)
            wrong.push(
              `${writer}: ${from} → ${to} ${moved ? 'moved, the table refuses it' : 'never moved, the table allows it'}`,
            );
        }
      }
      if (s.removed.size > 0)
        wrong.push(`${writer}: removed messages in ${[...s.removed].join(', ')}`);
    }
    assert.deepEqual(wrong, []);
    // Every transition cause has a writer here (on SQLite, all but PostgreSQL's own).
    const ran = RUNS.filter((r) => !r.postgresOnly || testStore() === 'postgres').map(
      (r) => r.cause,
    );
    assert.deepEqual(
      [...new Set([...seen.values()].map((s) => s.cause))].sort(),
      [...new Set(ran)].sort(),
    );
    assert.deepEqual(
      [...new Set(RUNS.map((r) => r.cause))].sort(),
      [...new Set(TRANSITIONS.map((t) => t.cause)), 'delete', 'retention'].sort(),
    );
  });

  test('removals: each takes exactly the statuses the table names, and moves nothing', () => {
    for (const [writer, s] of seen) {
      if (s.cause !== 'delete' && s.cause !== 'retention') continue;
      const cause: RemovalCause = s.cause;
      assert.deepEqual(
        MESSAGE_STATUSES.filter((st) => s.removed.has(st)),
        [...removableFrom(cause)],
        writer,
      );
      assert.deepEqual([...s.moves], [], writer);
    }
  });

  test('statusIn writes the guard out as literals: one status compared, several listed', () => {
    assert.equal(statusIn(['sending']), "status = 'sending'");
    assert.equal(statusIn(['queued', 'scheduled']), "status IN ('queued', 'scheduled')");
    assert.throws(() => statusIn([]), /not a list of statuses/);
  });
});

describe('provider feedback on two connections at once never lowers a status (PostgreSQL: several nodes apply feedback)', {
  skip:
    testStore() === 'postgres'
      ? false
      : 'SQLite has one writer: feedback is applied one transaction at a time',
}, () => {
  test('a complaint being committed and a delivery read before it: the message stays complained, the delivery does not move it back', async () => {
    const ids = await twelveMessages({});
    const id = ids.get('sent')!;
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => (commit = resolve));
    let raised!: () => void;
    const complainedUncommitted = new Promise<void>((resolve) => (raised = resolve));
    // Connection A raises the message to complained and holds its transaction open.
    const a = q.transaction(async (tx) => {
      assert.equal(await raiseMessageStatus(tx, id, 'complained', T1), true);
      raised();
      await committing;
    });
    await complainedUncommitted;
    // Connection B, in its own transaction, sees `sent` (A has not committed) and tries `delivered`: its UPDATE waits for A's row lock.
    const b = q.transaction((tx) => raiseMessageStatus(tx, id, 'delivered', T1));
    while (
      (await q.get<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
      ))!.n === 0
    ) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    commit();
    await a;
    assert.equal(await b, false, 'the delivery found the message no longer sent');
    assert.equal(
      (await q.get<{ status: string }>('SELECT status FROM messages WHERE id = ?', id))!.status,
      'complained',
    );
  });
});
