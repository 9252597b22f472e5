import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type pg from 'pg';
import type { AcceptanceRecord } from '../../src/commit/acceptance.js';
import {
  commitAcceptanceGroup as commitThrough,
  type GroupAcceptanceUnit,
} from '../../src/commit/acceptanceGroup.js';
import type { DeliveryBookkeeping, DeliveryWrite } from '../../src/commit/deliveryBookkeeping.js';
import { DirectBookkeeping } from '../../src/commit/directBookkeeping.js';
import { silentLogger } from '../../src/log.js';
import type { LimitSettings } from '../../src/policy/usageLimits.js';
import { openDatabase } from '../../src/store/db.js';
import { finishSending, type HandOffEnd, leaseDueMessages } from '../../src/store/delivery.js';
import { insertMessage } from '../../src/store/messages.js';
import { postgresAcceptanceGroups } from '../../src/store/postgres/acceptanceGroups.js';
import {
  finishHandOffPostgres,
  type LeasedMessage,
  leaseDueMessagesPostgres,
} from '../../src/store/postgres/deliveryLeases.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { throttleAccount, throttledAccounts } from '../../src/store/postgres/providerThrottles.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { insertProject } from '../../src/store/projects.js';
import { sqliteQueries } from '../../src/store/queries.js';
import { tempDirs } from '../support/hooks.js';
import { DEFAULT_PLANS } from '../support/plans.js';
import {
  freshDatabase,
  postgresUnavailable,
  startPrivatePostgres,
  type TestPostgres,
  testPool,
} from '../support/postgres.js';
import { meetingPoint, withinHangGuard } from '../support/waiting.js';

/** A group committed on `pool`'s acceptance groups (store/postgres/acceptanceGroups.ts). */
const commitAcceptanceGroup = (
  pool: pg.Pool,
  units: readonly GroupAcceptanceUnit[],
  limits: Parameters<typeof commitThrough>[2],
) => commitThrough(postgresAcceptanceGroups(pool), units, limits);

/**
 * Delivery leases and provider throttles on PostgreSQL, shared by nodes: three pools on one
 * database stand for three nodes. Each test has a database of its own, since a lease takes
 * whatever is due in the whole database.
 */

const NOW = Date.UTC(2026, 10, 26, 12, 0, 0);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Quotas off: these tests are about what happens after acceptance. */
const LIMITS: LimitSettings = {
  enabled: false,
  plans: DEFAULT_PLANS,
  defaultPlan: 'pro',
  categoriesPerProject: 2,
};

const stateDir = tempDirs('postern-pg-leases-');

let serial = 0;

/** A queued message due at NOW (or scheduled for `scheduledAt`), as the acceptance pipeline records one. */
function acceptance(projectId: string, opts: { scheduledAt?: number } = {}): AcceptanceRecord {
  serial += 1;
  const id = `m.pglease.${process.pid}.${String(serial).padStart(5, '0')}`;
  const scheduled = opts.scheduledAt !== undefined;
  return {
    message: {
      id,
      project_id: projectId,
      environment: 'production',
      source: 'http',
      status: scheduled ? 'scheduled' : 'queued',
      hold_reason: null,
      from_email: 'app@app.example',
      recipients: JSON.stringify({ to: ['ann@example.org', 'bob@example.org'], cc: [], bcc: [] }),
      subject: `Hello ${serial}`,
      tags: '[]',
      metadata: '{}',
      category: null,
      routing: '{}',
      provider_options: null,
      scheduled_at: opts.scheduledAt ?? null,
      spool_path: `2026/11/26/${id}.eml`,
      size_bytes: 1000,
      idempotency_key: null,
      created_at: NOW,
      updated_at: NOW,
      next_attempt_at: opts.scheduledAt ?? NOW,
    },
    body: null,
    idempotency: null,
    usage: {
      projectId,
      environment: 'production',
      senderDomain: 'app.example',
      category: null,
      bytes: 1000,
    },
    event: {
      project_id: projectId,
      message_id: id,
      type: 'mail.accepted',
      created_at: NOW,
      data: JSON.stringify({ mail: { uid: id } }),
    },
  };
}

/** The columns a lease and an outcome write set, numbers as numbers. */
interface LeaseColumns {
  status: string;
  attempts: number;
  lease_until: number | null;
  lease_owner?: string | null;
  next_attempt_at: number | null;
  updated_at: number;
  provider_slug: string | null;
  provider_message_id: string | null;
  last_error: string | null;
  pending_recipients: string | null;
}

const LEASE_COLUMNS =
  'status, attempts, lease_until, lease_owner, next_attempt_at, updated_at, provider_slug, provider_message_id, last_error, pending_recipients';

const orNull = (v: string | number | null) => (v === null ? null : Number(v));

describe('delivery leases and provider throttles on PostgreSQL, shared by nodes', {
  skip: postgresUnavailable(),
}, () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPrivatePostgres();
  });
  after(async () => server?.stop());

  /** A fresh migrated database and three warm pools on it ("nodes"), for one test. */
  async function withNodes(run: (nodes: pg.Pool[]) => Promise<void>): Promise<void> {
    const database = await freshDatabase(server.url);
    const nodes = [0, 1, 2].map(() => testPool(database.url, 3));
    try {
      await migratePostgres(nodes[0], silentLogger());
      // Connected before the test: a node's first lease must not trail the others by a login.
      await Promise.all(nodes.map((p) => p.query('SELECT 1')));
      await run(nodes);
    } finally {
      await Promise.all(nodes.map((p) => p.end()));
      await database.drop();
    }
  }

  async function newProject(pool: pg.Pool): Promise<string> {
    const id = `p.pglease.${randomBytes(6).toString('hex')}`;
    await pool.query('INSERT INTO projects (id, name, plan, created_at) VALUES ($1, $2, $3, $4)', [
      id,
      `project ${id}`,
      'pro',
      NOW,
    ]);
    return id;
  }

  /** Stores the records through the acceptance commit, in groups of 50, and checks each was stored. */
  async function accept(pool: pg.Pool, records: AcceptanceRecord[]): Promise<string[]> {
    for (let i = 0; i < records.length; i += 50) {
      const results = await commitAcceptanceGroup(
        pool,
        records.slice(i, i + 50).map((record) => ({ record })),
        LIMITS,
      );
      assert.ok(
        results.every((r) => r.ok && r.outcome.kind === 'stored'),
        JSON.stringify(results.find((r) => !r.ok || r.outcome.kind !== 'stored')),
      );
    }
    return records.map((r) => r.message.id);
  }

  async function columns(pool: pg.Pool, id: string): Promise<LeaseColumns> {
    const row = (await pool.query(`SELECT ${LEASE_COLUMNS} FROM messages WHERE id = $1`, [id]))
      .rows[0] as Record<string, string | number | null>;
    return {
      status: row.status as string,
      attempts: row.attempts as number,
      lease_until: orNull(row.lease_until),
      lease_owner: row.lease_owner as string | null,
      next_attempt_at: orNull(row.next_attempt_at),
      updated_at: Number(row.updated_at),
      provider_slug: row.provider_slug as string | null,
      provider_message_id: row.provider_message_id as string | null,
      last_error: row.last_error as string | null,
      pending_recipients: row.pending_recipients as string | null,
    };
  }

  const ids = (leased: LeasedMessage[]) => leased.map((m) => m.id).sort();

  test('three nodes leasing 300 due messages at once, 25 at a time, until none is left: each message leased exactly once', async () => {
    await withNodes(async (nodes) => {
      const project = await newProject(nodes[0]);
      const accepted = await accept(
        nodes[0],
        Array.from({ length: 300 }, () => acceptance(project)),
      );
      const leases: { node: string; message: LeasedMessage }[] = [];
      const batches = [0, 0, 0];
      // Every node's first batch before any node's second (3 × 25 of the 300).
      const firstBatches = meetingPoint(nodes.length);
      await Promise.all(
        nodes.map(async (pool, n) => {
          for (;;) {
            const batch = await leaseDueMessagesPostgres(pool, {
              node: `node-${n}`,
              now: NOW,
              leaseUntil: NOW + MINUTE,
              limit: 25,
            });
            if (batch.length === 0) return;
            batches[n] += 1;
            assert.ok(batch.length <= 25);
            for (const message of batch) leases.push({ node: `node-${n}`, message });
            if (batches[n] === 1) await firstBatches.reached();
          }
        }),
      );
      const timesLeased = new Map<string, number>();
      for (const { message } of leases)
        timesLeased.set(message.id, (timesLeased.get(message.id) ?? 0) + 1);
      const twice = [...timesLeased].filter(([, times]) => times > 1).map(([id]) => id);
      assert.deepEqual(twice, [], `${twice.length} messages leased more than once`);
      assert.deepEqual(
        [...timesLeased.keys()].sort(),
        [...accepted].sort(),
        'every message leased',
      );
      assert.ok(
        batches.every((b) => b > 0),
        `the nodes took part together (batches per node: ${batches.join(', ')})`,
      );
      // What each node was handed is what the table says it holds.
      for (const { node, message } of leases) {
        assert.equal(message.lease_owner, node);
        assert.equal(message.status, 'sending');
        assert.equal(message.attempts, 1);
        assert.equal(message.lease_until, NOW + MINUTE);
        assert.equal(message.created_at, NOW, 'BIGINT columns arrive as numbers');
      }
      const owners = (
        await nodes[0].query<{ lease_owner: string; n: number }>(
          'SELECT lease_owner, count(*)::int AS n FROM messages GROUP BY lease_owner ORDER BY lease_owner',
        )
      ).rows;
      assert.deepEqual(
        owners,
        batches
          .map((_, n) => ({
            lease_owner: `node-${n}`,
            n: leases.filter((l) => l.node === `node-${n}`).length,
          }))
          .filter((o) => o.n > 0),
      );
      assert.deepEqual(
        await leaseDueMessagesPostgres(nodes[1], {
          node: 'node-1',
          now: NOW,
          leaseUntil: NOW + MINUTE,
          limit: 25,
        }),
        [],
      );
    });
  });

  test('a node does not wait for another node’s lease in progress: the messages it holds are skipped, then taken once it is over', async () => {
    await withNodes(async (nodes) => {
      const project = await newProject(nodes[0]);
      const accepted = await accept(
        nodes[0],
        Array.from({ length: 10 }, () => acceptance(project)),
      );
      const held = accepted.slice(0, 5);
      // Another node in the middle of its lease: the first five rows locked, not yet committed.
      const other = await nodes[2].connect();
      let lease: Promise<LeasedMessage[]> | undefined;
      try {
        await other.query('BEGIN');
        await other.query('SELECT id FROM messages WHERE id = ANY($1) FOR UPDATE', [held]);
        lease = leaseDueMessagesPostgres(nodes[0], {
          node: 'node-0',
          now: NOW,
          leaseUntil: NOW + MINUTE,
          limit: 100,
        });
        // Done while the other node still holds its locks (released only below): it did not wait for them.
        const first = await withinHangGuard(lease, 'the lease waited for the other node’s locks');
        assert.deepEqual(ids(first), accepted.slice(5).sort());
      } finally {
        await other.query('ROLLBACK');
        other.release();
        // A lease that waited ends now: settled here, not after the database is dropped under it.
        await lease?.catch(() => []);
      }
      assert.deepEqual(
        ids(
          await leaseDueMessagesPostgres(nodes[1], {
            node: 'node-1',
            now: NOW,
            leaseUntil: NOW + MINUTE,
            limit: 100,
          }),
        ),
        [...held].sort(),
      );
    });
  });

  test('a lease that ran out is taken by another node; the first node’s late outcome does not move the message, the second’s does', async () => {
    await withNodes(async ([a, b]) => {
      const project = await newProject(a);
      const [id] = await accept(a, [acceptance(project)]);
      assert.deepEqual(
        ids(
          await leaseDueMessagesPostgres(a, {
            node: 'node-a',
            now: NOW,
            leaseUntil: NOW + 1000,
            limit: 10,
          }),
        ),
        [id],
      );
      // Still A's while its lease runs.
      assert.deepEqual(
        await leaseDueMessagesPostgres(b, {
          node: 'node-b',
          now: NOW + 999,
          leaseUntil: NOW + MINUTE,
          limit: 10,
        }),
        [],
      );
      // A hangs; its lease runs out and B takes the message.
      const [retaken] = await leaseDueMessagesPostgres(b, {
        node: 'node-b',
        now: NOW + 2000,
        leaseUntil: NOW + 2000 + MINUTE,
        limit: 10,
      });
      assert.ok(retaken);
      assert.equal(retaken.id, id);
      assert.equal(retaken.lease_owner, 'node-b');
      assert.equal(retaken.attempts, 2);
      const takenByB = await columns(a, id);
      assert.deepEqual(
        {
          status: takenByB.status,
          lease_owner: takenByB.lease_owner,
          lease_until: takenByB.lease_until,
        },
        { status: 'sending', lease_owner: 'node-b', lease_until: NOW + 2000 + MINUTE },
      );

      // A wakes and records its outcome: refused, nothing changes.
      const sentByA: HandOffEnd = {
        status: 'sent',
        next_attempt_at: null,
        provider_slug: 'slow',
        provider_message_id: 'a-1',
        last_error: null,
        pending_recipients: null,
      };
      assert.equal(
        await finishHandOffPostgres(a, { id, node: 'node-a', now: NOW + 3000, ...sentByA }),
        false,
      );
      assert.deepEqual(await columns(a, id), takenByB);

      // B's outcome moves it and ends the lease.
      const sentByB: HandOffEnd = {
        status: 'sent',
        next_attempt_at: null,
        provider_slug: 'fast',
        provider_message_id: 'b-1',
        last_error: null,
        pending_recipients: null,
      };
      assert.equal(
        await finishHandOffPostgres(b, { id, node: 'node-b', now: NOW + 2500, ...sentByB }),
        true,
      );
      assert.deepEqual(await columns(b, id), {
        ...takenByB,
        status: 'sent',
        next_attempt_at: null,
        lease_until: null,
        lease_owner: null,
        updated_at: NOW + 2500,
        provider_slug: 'fast',
        provider_message_id: 'b-1',
      });
      // Once ended, no outcome moves it again, not even its last owner's.
      assert.equal(
        await finishHandOffPostgres(b, {
          id,
          node: 'node-b',
          now: NOW + 4000,
          ...sentByB,
          status: 'failed',
        }),
        false,
      );
      assert.equal((await columns(a, id)).status, 'sent');
    });
  });

  test('an exchange sent again after the database went away as it committed: its hand-off is recorded once, and the node takes back the leases it never heard of, not those it holds', async () => {
    await withNodes(async ([a, b]) => {
      const project = await newProject(a);
      const [sent, unheard1, unheard2, held, other] = await accept(
        a,
        Array.from({ length: 5 }, () => acceptance(project)),
      );
      const bookkeeping = new DirectBookkeeping(postgresQueries(a));
      const nothing: DeliveryBookkeeping = { writes: [], expire: null, lease: null, reclaim: null };
      // Node A's lease lands; as far as A knows (its answer cut off) it holds only `sent` and `held`.
      const leasedByA = await bookkeeping.write('delivery', {
        ...nothing,
        lease: { node: 'node-a', now: NOW, leaseUntil: NOW + HOUR, limit: 4 },
      });
      assert.deepEqual(
        ids(leasedByA.result.leased as LeasedMessage[]),
        [sent, unheard1, unheard2, held].sort(),
      );
      assert.deepEqual(
        ids(
          await leaseDueMessagesPostgres(b, {
            node: 'node-b',
            now: NOW,
            leaseUntil: NOW + HOUR,
            limit: 10,
          }),
        ),
        [other],
      );

      // `sent`'s hand-off ends: the same write twice, the second as an exchange tried again after its first commit's answer was cut off.
      const row = (
        await a.query('SELECT id, project_id, subject, from_email FROM messages WHERE id = $1', [
          sent,
        ])
      ).rows[0] as { id: string; project_id: string; subject: string; from_email: string };
      const attempt = (id: string) => ({
        kind: 'attempt' as const,
        attempt: {
          message_id: id,
          provider_account_id: 'pa.1',
          provider_slug: 'smtp',
          started_at: NOW + 5,
          finished_at: NOW + 10,
          outcome: 'sent' as const,
          reply: '250 ok',
          provider_message_id: 'relay-1',
        },
      });
      const end: DeliveryWrite = {
        kind: 'finish',
        id: sent,
        to: {
          status: 'sent',
          next_attempt_at: null,
          provider_slug: 'smtp',
          provider_message_id: 'relay-1',
          last_error: null,
          pending_recipients: null,
        },
        at: NOW + 10,
        event: null,
        node: 'node-a',
        records: [
          attempt(sent),
          { kind: 'usage', accountId: 'pa.1', period: '2026-11' },
          {
            kind: 'event',
            event: { message: row, type: 'mail.sent', at: NOW + 10, extra: { provider: 'smtp' } },
          },
        ],
      };
      await bookkeeping.write('delivery', { ...nothing, writes: [end] });
      await bookkeeping.write('delivery', { ...nothing, writes: [{ ...end, retried: true }] });
      const count = async (sql: string, params: unknown[]) =>
        Number((await a.query(sql, params)).rows[0].n);
      assert.equal((await columns(a, sent)).status, 'sent');
      assert.equal(
        await count('SELECT count(*) AS n FROM attempts WHERE message_id = $1', [sent]),
        1,
        'one attempt row',
      );
      assert.equal(
        await count(
          "SELECT count(*) AS n FROM events WHERE message_id = $1 AND type = 'mail.sent'",
          [sent],
        ),
        1,
        'one mail.sent',
      );
      assert.equal(
        await count(
          "SELECT messages AS n FROM provider_usage WHERE provider_account_id = 'pa.1'",
          [],
        ),
        1,
        'counted once',
      );

      const heldEnd: DeliveryWrite = { ...end, id: held, records: [attempt(held)], retried: true };
      // Node A takes back what it leased without knowing: not `held` (its hand-off is under way), not `sent` (ended), not B's.
      const back = await bookkeeping.write('delivery', {
        ...nothing,
        reclaim: { node: 'node-a', now: NOW + 20, leaseUntil: NOW + 20 + HOUR, holding: [held] },
      });
      assert.deepEqual(ids(back.result.reclaimed as LeasedMessage[]), [unheard1, unheard2].sort());
      assert.deepEqual(back.result.leased, []);
      for (const id of [unheard1, unheard2])
        assert.deepEqual(
          await columns(a, id).then((c) => [c.status, c.lease_owner, c.lease_until, c.attempts]),
          ['sending', 'node-a', NOW + 20 + HOUR, 1],
        );
      // `held`'s end, tried again when its first try did not land: it moves the message, and its records are written.
      await bookkeeping.write('delivery', { ...nothing, writes: [heldEnd] });
      assert.equal((await columns(a, held)).status, 'sent');
      assert.equal(
        await count('SELECT count(*) AS n FROM attempts WHERE message_id = $1', [held]),
        1,
      );
      assert.equal((await columns(b, other)).lease_owner, 'node-b');
    });
  });

  test('paused projects’ messages (due or with a lease run out) and scheduled messages not yet due are not leased', async () => {
    await withNodes(async ([a, b]) => {
      const paused = await newProject(a);
      const active = await newProject(a);
      const pausedIds = await accept(a, [
        acceptance(paused),
        acceptance(paused),
        acceptance(paused),
      ]);
      // One of the paused project's messages is out on a lease when the project is paused; the lease then runs out.
      const [outOnLease] = await leaseDueMessagesPostgres(a, {
        node: 'node-a',
        now: NOW,
        leaseUntil: NOW + 1000,
        limit: 1,
      });
      assert.ok(outOnLease && pausedIds.includes(outOnLease.id));
      await a.query('UPDATE projects SET paused = 1 WHERE id = $1', [paused]);
      const [dueNow, later] = await accept(a, [
        acceptance(active),
        acceptance(active, { scheduledAt: NOW + HOUR }),
      ]);

      assert.deepEqual(
        ids(
          await leaseDueMessagesPostgres(b, {
            node: 'node-b',
            now: NOW + 2000,
            leaseUntil: NOW + 2 * HOUR,
            limit: 100,
          }),
        ),
        [dueNow],
      );
      assert.deepEqual(
        await leaseDueMessagesPostgres(b, {
          node: 'node-b',
          now: NOW + HOUR - 1,
          leaseUntil: NOW + 2 * HOUR,
          limit: 100,
        }),
        [],
      );
      const scheduled = await leaseDueMessagesPostgres(b, {
        node: 'node-b',
        now: NOW + HOUR,
        leaseUntil: NOW + 2 * HOUR,
        limit: 100,
      });
      assert.deepEqual(ids(scheduled), [later]);
      assert.equal(scheduled[0].status, 'sending');

      // Resumed, its messages are leased again: the one whose lease ran out among them.
      await a.query('UPDATE projects SET paused = 0 WHERE id = $1', [paused]);
      const resumed = await leaseDueMessagesPostgres(b, {
        node: 'node-b',
        now: NOW + HOUR,
        leaseUntil: NOW + 2 * HOUR,
        limit: 100,
      });
      assert.deepEqual(ids(resumed), [...pausedIds].sort());
      assert.equal(resumed.find((m) => m.id === outOnLease.id)?.attempts, 2);
    });
  });

  test('an outcome write sets the same columns to the same values as SQLite’s, lease and all', async () => {
    await withNodes(async ([pool]) => {
      const project = await newProject(pool);
      const record = acceptance(project);
      await accept(pool, [record]);
      const db = openDatabase(stateDir(), silentLogger());
      try {
        await insertProject(sqliteQueries(db), {
          id: project,
          name: 'twin',
          plan: 'pro',
          created_at: NOW,
        });
        await insertMessage(sqliteQueries(db), record.message);
        const onSqlite = (): LeaseColumns => {
          const row = db
            .prepare(
              `SELECT ${LEASE_COLUMNS.replace(', lease_owner', '')} FROM messages WHERE id = ?`,
            )
            .get(record.message.id) as LeaseColumns;
          return { ...row };
        };
        const onPostgres = async (): Promise<LeaseColumns> => {
          const { lease_owner: _owner, ...rest } = await columns(pool, record.message.id);
          return rest;
        };
        const lease = async (now: number, leaseUntil: number) => {
          const sqliteLeased = (await leaseDueMessages(sqliteQueries(db), now, leaseUntil, 10)).map(
            (m) => m.id,
          );
          const postgresLeased = (
            await leaseDueMessagesPostgres(pool, { node: 'node-0', now, leaseUntil, limit: 10 })
          ).map((m) => m.id);
          assert.deepEqual(postgresLeased, sqliteLeased, `leased at ${now - NOW}`);
          assert.deepEqual(await onPostgres(), onSqlite(), `after the lease at ${now - NOW}`);
        };
        const finish = async (to: HandOffEnd, now: number) => {
          const movedOnSqlite = await finishSending(sqliteQueries(db), record.message.id, to, now);
          assert.equal(
            await finishHandOffPostgres(pool, {
              id: record.message.id,
              node: 'node-0',
              now,
              ...to,
            }),
            movedOnSqlite,
          );
          assert.deepEqual(await onPostgres(), onSqlite(), `after ${JSON.stringify(to)}`);
        };
        await lease(NOW, NOW + MINUTE);
        // A partial hand-off: one recipient deferred, back on the ladder with the provider's id.
        await finish(
          {
            status: 'queued',
            next_attempt_at: NOW + 5 * MINUTE,
            provider_slug: 'smtp',
            provider_message_id: 'pm-1',
            last_error: 'bob: 451',
            pending_recipients: ['bob@example.org'],
          },
          NOW + 100,
        );
        await lease(NOW + 5 * MINUTE, NOW + 6 * MINUTE);
        // A failed try keeps the pending recipients and the provider's id (omitted: unchanged).
        await finish(
          { status: 'queued', next_attempt_at: NOW + 20 * MINUTE, last_error: 'timeout' },
          NOW + 5 * MINUTE + 100,
        );
        await lease(NOW + 20 * MINUTE, NOW + 21 * MINUTE);
        await finish(
          {
            status: 'sent',
            next_attempt_at: null,
            provider_slug: 'smtp',
            last_error: null,
            pending_recipients: null,
          },
          NOW + 20 * MINUTE + 100,
        );
        await lease(NOW + HOUR, NOW + 2 * HOUR);
        await finish({ status: 'failed', next_attempt_at: null, last_error: 'late' }, NOW + HOUR);
      } finally {
        db.close();
      }
    });
  });

  test('provider throttles: the later reset wins, an earlier one never shortens it, whichever node writes; every node reads the same', async () => {
    await withNodes(async ([a, b, c]) => {
      assert.equal(await throttleAccount(a, 'acct.one', NOW + 10_000), NOW + 10_000);
      assert.equal(
        await throttleAccount(b, 'acct.one', NOW + 5_000),
        NOW + 10_000,
        'an earlier reset does not shorten the rest',
      );
      assert.equal(
        await throttleAccount(c, 'acct.one', NOW + 20_000),
        NOW + 20_000,
        'a later one lengthens it',
      );
      assert.equal(await throttleAccount(a, 'acct.two', NOW + 1_000), NOW + 1_000);

      for (const pool of [a, b, c]) {
        assert.deepEqual(
          await throttledAccounts(pool, NOW),
          new Map([
            ['acct.one', NOW + 20_000],
            ['acct.two', NOW + 1_000],
          ]),
        );
        // At its reset an account is no longer resting.
        assert.deepEqual(
          await throttledAccounts(pool, NOW + 1_000),
          new Map([['acct.one', NOW + 20_000]]),
        );
        assert.deepEqual(await throttledAccounts(pool, NOW + 20_000), new Map());
      }

      // Nodes told different resets at once: the latest stands, whatever order the writes land in.
      const resets = Array.from({ length: 60 }, (_, i) => NOW + 30_000 + ((i * 7919) % 60) * 1000);
      await Promise.all(
        resets.map((until, i) => throttleAccount([a, b, c][i % 3], 'acct.three', until)),
      );
      assert.equal((await throttledAccounts(b, NOW)).get('acct.three'), Math.max(...resets));
    });
  });
});
