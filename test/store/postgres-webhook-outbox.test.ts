import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type pg from 'pg';
import type { AcceptanceRecord } from '../../src/commit/acceptance.js';
import {
  commitAcceptanceGroup as commitThrough,
  type GroupAcceptanceUnit,
} from '../../src/commit/acceptanceGroup.js';
import {
  applyWebhookBookkeeping,
  type WebhookBookkeeping,
  type WebhookOutcomeRecord,
} from '../../src/commit/webhookBookkeeping.js';
import { silentLogger } from '../../src/log.js';
import type { LimitSettings } from '../../src/policy/usageLimits.js';
import { openDatabase } from '../../src/store/db.js';
import { eventsAfter } from '../../src/store/eventOutbox.js';
import { insertEvent } from '../../src/store/events.js';
import { postgresAcceptanceGroups } from '../../src/store/postgres/acceptanceGroups.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresMigrations } from '../../src/store/postgres/migrations.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import {
  claimDueDeliveriesPostgres,
  type EndpointOutcome,
  fanOutEventsPostgres,
  hasQueuedEventsPostgres,
  insertWebhookEndpointPostgres,
  type LeasedDelivery,
  markEndpointFailurePostgres,
  markEndpointSuccessPostgres,
  recordWebhookOutcomesPostgres,
  removeWebhookEndpointPostgres,
  type WebhookOutcome,
} from '../../src/store/postgres/webhookOutbox.js';
import { insertProject } from '../../src/store/projects.js';
import type { Queries } from '../../src/store/queries.js';
import { sqliteQueries } from '../../src/store/queries.js';
import {
  enableWebhookEndpoint,
  insertWebhookEndpoint,
  markEndpointFailure,
  markEndpointSuccess,
} from '../../src/store/webhookEndpoints.js';
import { tempDirs } from '../support/hooks.js';
import { DEFAULT_PLANS } from '../support/plans.js';
import {
  freshDatabase,
  postgresUnavailable,
  startPrivatePostgres,
  type TestPostgres,
  testPool,
} from '../support/postgres.js';
import { seededRandom } from '../support/seededRandom.js';
import { meetingPoint, withinHangGuard } from '../support/waiting.js';

/** A group committed on `pool`'s acceptance groups (store/postgres/acceptanceGroups.ts). */
const commitAcceptanceGroup = (
  pool: pg.Pool,
  units: readonly GroupAcceptanceUnit[],
  limits: Parameters<typeof commitThrough>[2],
) => commitThrough(postgresAcceptanceGroups(pool), units, limits);

/**
 * The webhook outbox on PostgreSQL (src/store/postgres/webhookOutbox.ts), shared by nodes: three
 * pools on one database stand for three nodes. Each test has a database of its own. Time is
 * given as numbers (`now`), as the store takes it: no lease is waited out.
 */

const NOW = Date.UTC(2026, 10, 26, 12, 0, 0);
const MINUTE = 60_000;
const DISABLE_AFTER_MS = 10 * MINUTE;

/** Quotas off: these tests are about what happens after acceptance. */
const LIMITS: LimitSettings = {
  enabled: false,
  plans: DEFAULT_PLANS,
  defaultPlan: 'pro',
  categoriesPerProject: 2,
};

const stateDir = tempDirs('postern-pg-outbox-');

interface Node {
  name: string;
  pool: pg.Pool;
  q: Queries;
}

let serial = 0;

/** A queued message with its `mail.accepted` event, as the acceptance pipeline records one. */
function acceptance(projectId: string): AcceptanceRecord {
  serial += 1;
  const id = `m.pgoutbox.${process.pid}.${String(serial).padStart(5, '0')}`;
  return {
    message: {
      id,
      project_id: projectId,
      environment: 'production',
      source: 'http',
      status: 'queued',
      hold_reason: null,
      from_email: 'app@app.example',
      recipients: JSON.stringify({ to: ['ann@example.org'], cc: [], bcc: [] }),
      subject: `Hello ${serial}`,
      tags: '[]',
      metadata: '{}',
      category: null,
      routing: '{}',
      provider_options: null,
      scheduled_at: null,
      spool_path: `2026/11/26/${id}.eml`,
      size_bytes: 1000,
      idempotency_key: null,
      created_at: NOW,
      updated_at: NOW,
      next_attempt_at: NOW,
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

/** The health columns markEndpointSuccess / markEndpointFailure write. */
interface Health {
  failing_since: number | null;
  last_success_at: number | null;
  last_failure_at: number | null;
  disabled_at: number | null;
  disabled_reason: string | null;
}
const HEALTH_COLUMNS =
  'failing_since, last_success_at, last_failure_at, disabled_at, disabled_reason';

const reasonText = (since: number, error: string | null) =>
  `every attempt failed for 10 min (since ${new Date(since).toISOString()}); last: ${error ?? 'unknown error'}`;

describe('the webhook outbox on PostgreSQL, shared by three nodes', {
  skip: postgresUnavailable(),
}, () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPrivatePostgres();
  });
  after(async () => server?.stop());

  /** A fresh database (migrated with `migrations`, all by default) and three warm pools on it, for one test. */
  async function withNodes(
    run: (nodes: Node[]) => Promise<void>,
    migrations = postgresMigrations,
  ): Promise<void> {
    const database = await freshDatabase(server.url);
    const nodes = [0, 1, 2].map((n): Node => {
      const pool = testPool(database.url, 4);
      return { name: `node-${n}`, pool, q: postgresQueries(pool) };
    });
    try {
      await migratePostgres(nodes[0].pool, silentLogger(), migrations);
      await Promise.all(nodes.map((n) => n.pool.query('SELECT 1')));
      await run(nodes);
    } finally {
      await Promise.all(nodes.map((n) => n.pool.end()));
      await database.drop();
    }
  }

  async function newProject(q: Queries): Promise<string> {
    const id = `p.pgoutbox.${randomBytes(6).toString('hex')}`;
    await q.run(
      'INSERT INTO projects (id, name, plan, created_at) VALUES (?, ?, ?, ?)',
      id,
      `project ${id}`,
      'pro',
      NOW,
    );
    return id;
  }

  async function newEndpoint(
    q: Queries,
    projectId: string,
    types: string[] | null = null,
    createdAt = NOW,
  ): Promise<string> {
    const id = `wh.${randomBytes(10).toString('hex')}`;
    await insertWebhookEndpointPostgres(q, {
      id,
      project_id: projectId,
      url: 'https://hooks.example/in',
      event_types: types && JSON.stringify(types),
      secret: 's',
      created_at: createdAt,
    });
    return id;
  }

  /** Commits `n` events of `type` in one transaction; their seqs. */
  async function insertEvents(
    q: Queries,
    projectId: string,
    n: number,
    type = 'mail.sent',
  ): Promise<number[]> {
    return q.transaction(async (tx) => {
      const seqs: number[] = [];
      for (let i = 0; i < n; i++) {
        const row = await tx.get<{ seq: number }>(
          'INSERT INTO events (project_id, message_id, type, created_at, data) VALUES (?, NULL, ?, ?, ?) RETURNING seq',
          projectId,
          type,
          NOW,
          '{}',
        );
        seqs.push(row!.seq);
      }
      return seqs;
    });
  }

  /** Every delivery as `endpoint_id event_seq`, sorted, repeats kept. */
  async function deliveryPairs(q: Queries): Promise<string[]> {
    const rows = await q.all<{ endpoint_id: string; event_seq: number }>(
      'SELECT endpoint_id, event_seq FROM webhook_deliveries',
    );
    return rows.map((r) => `${r.endpoint_id} ${r.event_seq}`).sort();
  }

  /** Fans out with every node in turn until nothing is queued. */
  async function fanOutAll(nodes: Node[], now = NOW): Promise<void> {
    for (let round = 0; await hasQueuedEventsPostgres(nodes[0].q); round++) {
      await fanOutEventsPostgres(nodes[round % nodes.length].q, { now, limit: 100 });
    }
  }

  async function health(q: Queries, endpointId: string): Promise<Health> {
    return (await q.get<Health>(
      `SELECT ${HEALTH_COLUMNS} FROM webhook_endpoints WHERE id = ?`,
      endpointId,
    ))!;
  }

  test('events committed out of seq order are each fanned out exactly once; a rolled-back event never', async () => {
    await withNodes(async ([a, b, c]) => {
      const project = await newProject(a.q);
      const every = await newEndpoint(a.q, project);
      const sentOnly = await newEndpoint(a.q, project, ['mail.sent']);
      const bouncedOnly = await newEndpoint(a.q, project, ['mail.bounced']);
      const insertHeld = async (client: pg.PoolClient) => {
        await client.query('BEGIN');
        const r = await client.query<{ seq: string }>(
          "INSERT INTO events (project_id, message_id, type, created_at, data) VALUES ($1, NULL, 'mail.sent', $2, '{}') RETURNING seq",
          [project, NOW],
        );
        return Number(r.rows[0].seq);
      };
      // Node A's transaction takes the smaller seq and stays open; another one will roll back.
      const held = await a.pool.connect();
      const doomed = await b.pool.connect();
      let small: number;
      let large: number;
      try {
        small = await insertHeld(held);
        const rolledBack = await insertHeld(doomed);
        [large] = await insertEvents(b.q, project, 1);
        assert.ok(
          small < rolledBack && rolledBack < large,
          `seqs ${small}, ${rolledBack}, ${large}`,
        );
        // The larger seq is committed and fanned out first: a cursor would now stand past the smaller one.
        assert.deepEqual(await fanOutEventsPostgres(c.q, { now: NOW, limit: 100 }), {
          events: 1,
          deliveries: 2,
        });
        assert.deepEqual(
          await fanOutEventsPostgres(a.q, { now: NOW, limit: 100 }),
          { events: 0, deliveries: 0 },
          'nothing committed is left',
        );
        assert.deepEqual(
          await deliveryPairs(a.q),
          [`${every} ${large}`, `${sentOnly} ${large}`].sort(),
        );
        await held.query('COMMIT');
        await doomed.query('ROLLBACK');
      } finally {
        held.release();
        doomed.release();
      }
      assert.deepEqual(
        await a.q.all<{ seq: number }>('SELECT seq FROM events WHERE seq > ?', large),
        [],
        'nothing after the larger seq: a cursor there never reads the smaller one',
      );
      assert.deepEqual(await fanOutEventsPostgres(b.q, { now: NOW, limit: 100 }), {
        events: 1,
        deliveries: 2,
      });
      assert.deepEqual(await fanOutEventsPostgres(c.q, { now: NOW, limit: 100 }), {
        events: 0,
        deliveries: 0,
      });
      assert.equal(await hasQueuedEventsPostgres(a.q), false);
      assert.deepEqual(
        await deliveryPairs(a.q),
        [
          `${every} ${small}`,
          `${every} ${large}`,
          `${sentOnly} ${small}`,
          `${sentOnly} ${large}`,
        ].sort(),
      );
      assert.ok(!(await deliveryPairs(a.q)).some((p) => p.startsWith(bouncedOnly)));
      const rows = await a.q.all<{
        status: string;
        attempts: number;
        next_attempt_at: number;
        created_at: number;
        lease_owner: string | null;
        type: string;
      }>(
        'SELECT status, attempts, next_attempt_at, created_at, lease_owner, type FROM webhook_deliveries',
      );
      for (const row of rows)
        assert.deepEqual(row, {
          status: 'pending',
          attempts: 0,
          next_attempt_at: NOW,
          created_at: NOW,
          lease_owner: null,
          type: 'mail.sent',
        });
    });
  });

  test('three nodes fanning out 500 events while three nodes’ acceptance commits interleave: each (endpoint, event) delivery exactly once', async (t) => {
    await withNodes(async (nodes) => {
      const [p1, p2, p3] = [
        await newProject(nodes[0].q),
        await newProject(nodes[0].q),
        await newProject(nodes[0].q),
      ];
      const endpoints = {
        p1All: await newEndpoint(nodes[0].q, p1),
        p1Accepted: await newEndpoint(nodes[1].q, p1, ['mail.accepted', 'mail.sent']),
        p1Bounced: await newEndpoint(nodes[2].q, p1, ['mail.bounced']),
        p2All: await newEndpoint(nodes[0].q, p2),
      };
      // Groups of one project each: a group holds its project's lock to its commit, so groups of
      // different projects commit side by side, their seqs out of order.
      const groups = Array.from({ length: 50 }, (_, g) =>
        Array.from({ length: 10 }, () => acceptance([p1, p2, p3][g % 3])),
      );
      let nextGroup = 0;
      let writing = nodes.length;
      const fannedOutBy = [0, 0, 0];
      // Every node's first events before any node's next (3 × 25 of the 500).
      const firstBatches = meetingPoint(nodes.length);
      await Promise.all([
        // Each node's acceptance writer commits groups as it gets them: seqs commit out of order.
        ...nodes.map(async (node) => {
          try {
            for (let g = nextGroup++; g < groups.length; g = nextGroup++) {
              const results = await commitAcceptanceGroup(
                node.pool,
                groups[g].map((record) => ({ record })),
                LIMITS,
              );
              assert.ok(
                results.every((r) => r.ok && r.outcome.kind === 'stored'),
                JSON.stringify(results.find((r) => !r.ok)),
              );
            }
          } finally {
            writing -= 1;
          }
        }),
        // Each node's fan-out, meanwhile, small batches, until the writers are done and nothing is queued.
        ...nodes.map(async (node, n) => {
          for (;;) {
            const done = writing === 0;
            const { events } = await fanOutEventsPostgres(node.q, { now: NOW, limit: 25 });
            const first = fannedOutBy[n] === 0 && events > 0;
            fannedOutBy[n] += events;
            if (first) await firstBatches.reached();
            if (events === 0) {
              if (done && !(await hasQueuedEventsPostgres(node.q))) return;
              await new Promise((resolve) => setTimeout(resolve, 1));
            }
          }
        }),
      ]);
      assert.equal(
        fannedOutBy.reduce((x, y) => x + y),
        500,
      );
      assert.ok(
        fannedOutBy.every((n) => n > 0),
        `the nodes took part together (events per node: ${fannedOutBy.join(', ')})`,
      );
      const events = await nodes[0].q.all<{ seq: number; project_id: string }>(
        "SELECT seq, project_id FROM events WHERE type = 'mail.accepted'",
      );
      assert.equal(events.length, 500);
      const expected = events
        .flatMap((e) =>
          (e.project_id === p1
            ? [endpoints.p1All, endpoints.p1Accepted]
            : e.project_id === p2
              ? [endpoints.p2All]
              : []
          ).map((id) => `${id} ${e.seq}`),
        )
        .sort();
      const actual = await deliveryPairs(nodes[0].q);
      const twice = actual.filter((p, i) => actual[i - 1] === p);
      assert.deepEqual(twice, [], `${twice.length} deliveries made more than once`);
      assert.deepEqual(actual, expected);
      // How out of order they came: deliveries numbered in fan-out order, events in seq order.
      const order = await nodes[0].q.all<{ event_seq: number }>(
        'SELECT event_seq FROM webhook_deliveries ORDER BY seq',
      );
      const late = order.filter((d, i) => i > 0 && d.event_seq < order[i - 1].event_seq).length;
      t.diagnostic(
        `events per node: ${fannedOutBy.join(', ')}; deliveries made after one of a larger event seq: ${late}`,
      );
    });
  });

  test('three nodes claiming 300 due deliveries of two endpoints, 25 at a time: each claimed exactly once, by the node the row names', async () => {
    await withNodes(async (nodes) => {
      const project = await newProject(nodes[0].q);
      const endpoints = [
        await newEndpoint(nodes[0].q, project, null, NOW),
        await newEndpoint(nodes[0].q, project, null, NOW + 1),
      ];
      await insertEvents(nodes[0].q, project, 150);
      await fanOutAll(nodes);
      assert.equal((await deliveryPairs(nodes[0].q)).length, 300);
      // Nothing is due before its time.
      assert.deepEqual(
        await claimDueDeliveriesPostgres(nodes[0].q, {
          endpointId: endpoints[0],
          node: 'node-0',
          now: NOW - 1,
          leaseUntil: NOW + MINUTE,
          limit: 25,
        }),
        [],
      );
      const claims: { node: string; delivery: LeasedDelivery }[] = [];
      const batches = [0, 0, 0];
      // Every node's first round before any node's next (at most 3 × 50 of the 300).
      const firstRounds = meetingPoint(nodes.length);
      await Promise.all(
        nodes.map(async (node, n) => {
          for (let round = 0; ; round++) {
            let got = 0;
            // Each node starts with a different endpoint, as lanes rotate.
            for (const endpointId of [endpoints[(n + round) % 2], endpoints[(n + round + 1) % 2]]) {
              const batch = await claimDueDeliveriesPostgres(node.q, {
                endpointId,
                node: node.name,
                now: NOW,
                leaseUntil: NOW + MINUTE,
                limit: 25,
              });
              assert.ok(batch.length <= 25);
              for (const delivery of batch) {
                assert.equal(delivery.endpoint_id, endpointId);
                claims.push({ node: node.name, delivery });
              }
              got += batch.length;
              if (batch.length > 0) batches[n] += 1;
            }
            if (got === 0) return;
            if (round === 0) await firstRounds.reached();
          }
        }),
      );
      const times = new Map<number, number>();
      for (const { delivery } of claims)
        times.set(delivery.seq, (times.get(delivery.seq) ?? 0) + 1);
      const twice = [...times].filter(([, n]) => n > 1);
      assert.deepEqual(twice, [], `${twice.length} deliveries claimed more than once`);
      const all = await nodes[0].q.all<{
        seq: number;
        lease_owner: string;
        next_attempt_at: number;
        attempts: number;
      }>('SELECT seq, lease_owner, next_attempt_at, attempts FROM webhook_deliveries ORDER BY seq');
      assert.deepEqual(
        [...times.keys()].sort((x, y) => x - y),
        all.map((d) => d.seq),
        'every delivery claimed',
      );
      assert.ok(
        batches.every((b) => b > 0),
        `the nodes took part together (batches per node: ${batches.join(', ')})`,
      );
      const owner = new Map(claims.map(({ node, delivery }) => [delivery.seq, node]));
      for (const row of all)
        assert.deepEqual(row, {
          seq: row.seq,
          lease_owner: owner.get(row.seq),
          next_attempt_at: NOW + MINUTE,
          attempts: 0,
        });
      for (const { node, delivery } of claims) assert.equal(delivery.lease_owner, node);
      // While the leases run, nothing is claimable.
      for (const endpointId of endpoints)
        assert.deepEqual(
          await claimDueDeliveriesPostgres(nodes[1].q, {
            endpointId,
            node: 'node-1',
            now: NOW + MINUTE - 1,
            leaseUntil: NOW + 2 * MINUTE,
            limit: 500,
          }),
          [],
        );
    });
  });

  test('a claim does not wait for another node’s claim in progress: the rows it holds are skipped, then claimed once it is over', async () => {
    await withNodes(async ([a, b, c]) => {
      const project = await newProject(a.q);
      const endpoint = await newEndpoint(a.q, project);
      await insertEvents(a.q, project, 10);
      await fanOutAll([a]);
      const seqs = (
        await a.q.all<{ seq: number }>('SELECT seq FROM webhook_deliveries ORDER BY seq')
      ).map((r) => r.seq);
      const other = await c.pool.connect();
      let claim: Promise<LeasedDelivery[]> | undefined;
      try {
        await other.query('BEGIN');
        await other.query('SELECT seq FROM webhook_deliveries WHERE seq = ANY($1) FOR UPDATE', [
          seqs.slice(0, 4),
        ]);
        claim = claimDueDeliveriesPostgres(a.q, {
          endpointId: endpoint,
          node: 'node-a',
          now: NOW,
          leaseUntil: NOW + MINUTE,
          limit: 100,
        });
        // Done while the other node still holds its locks (released only below): it did not wait for them.
        const first = await withinHangGuard(claim, 'the claim waited for the other node’s locks');
        assert.deepEqual(
          first.map((d) => d.seq),
          seqs.slice(4),
          'the free ones, oldest due first',
        );
      } finally {
        await other.query('ROLLBACK');
        other.release();
        await claim?.catch(() => []);
      }
      assert.deepEqual(
        (
          await claimDueDeliveriesPostgres(b.q, {
            endpointId: endpoint,
            node: 'node-b',
            now: NOW,
            leaseUntil: NOW + MINUTE,
            limit: 100,
          })
        ).map((d) => d.seq),
        seqs.slice(0, 4),
      );
    });
  });

  test('a lease that ran out is claimed by another node; the first node’s late outcome is refused and changes nothing, the second’s is recorded', async () => {
    await withNodes(async ([a, b, c]) => {
      const project = await newProject(a.q);
      const endpoint = await newEndpoint(a.q, project);
      const [event] = await insertEvents(a.q, project, 1);
      await fanOutAll([a]);
      const claim = (q: Queries, node: string, now: number, leaseUntil: number) =>
        claimDueDeliveriesPostgres(q, { endpointId: endpoint, node, now, leaseUntil, limit: 10 });
      const row = async () =>
        (await a.q.get<Record<string, unknown>>('SELECT * FROM webhook_deliveries'))!;
      const outcome = (seq: number, o: Partial<WebhookOutcome>): WebhookOutcome => ({
        seq,
        endpointId: endpoint,
        at: NOW,
        ok: true,
        status: 200,
        error: null,
        nextAttemptAt: null,
        countsAgainstEndpoint: true,
        ...o,
      });
      const record = (q: Queries, node: string, outcomes: WebhookOutcome[]) =>
        recordWebhookOutcomesPostgres(q, {
          node,
          outcomes,
          disableAfterMs: DISABLE_AFTER_MS,
          reason: (since, o) => reasonText(since, o.error),
        });

      const [mine] = await claim(a.q, 'node-a', NOW, NOW + 1000);
      assert.ok(mine);
      assert.deepEqual(
        { event_seq: mine.event_seq, lease_owner: mine.lease_owner, attempts: mine.attempts },
        { event_seq: event, lease_owner: 'node-a', attempts: 0 },
      );
      // Still A's while its lease runs.
      assert.deepEqual(await claim(b.q, 'node-b', NOW + 999, NOW + MINUTE), []);
      // A hangs; its lease runs out and B claims the delivery.
      const [retaken] = await claim(b.q, 'node-b', NOW + 2000, NOW + 2000 + MINUTE);
      assert.ok(retaken);
      assert.deepEqual(
        { seq: retaken.seq, lease_owner: retaken.lease_owner, attempts: retaken.attempts },
        { seq: mine.seq, lease_owner: 'node-b', attempts: 0 },
      );
      const takenByB = await row();
      assert.equal(takenByB.next_attempt_at, NOW + 2000 + MINUTE);

      // A wakes and records its success: refused; the delivery and the endpoint's health unchanged.
      const healthBefore = await health(a.q, endpoint);
      assert.deepEqual(await record(a.q, 'node-a', [outcome(mine.seq, { at: NOW + 3000 })]), {
        recorded: [],
        refused: [mine.seq],
        disabled: [],
      });
      assert.deepEqual(await row(), takenByB);
      assert.deepEqual(await health(a.q, endpoint), healthBefore);

      // B's attempt failed: recorded, due again on the ladder, its lease over.
      assert.deepEqual(
        await record(b.q, 'node-b', [
          outcome(mine.seq, {
            at: NOW + 2500,
            ok: false,
            status: 503,
            error: 'HTTP 503',
            nextAttemptAt: NOW + 10 * MINUTE,
          }),
        ]),
        {
          recorded: [mine.seq],
          refused: [],
          disabled: [],
        },
      );
      assert.deepEqual(await row(), {
        ...takenByB,
        status: 'pending',
        attempts: 1,
        next_attempt_at: NOW + 10 * MINUTE,
        last_attempt_at: NOW + 2500,
        last_status: 503,
        last_error: 'HTTP 503',
        completed_at: null,
        lease_owner: null,
      });
      assert.deepEqual(await health(a.q, endpoint), {
        ...healthBefore,
        failing_since: NOW + 2500,
        last_failure_at: NOW + 2500,
      });
      // The same outcome again: the lease has ended, refused.
      assert.deepEqual(
        (
          await record(b.q, 'node-b', [
            outcome(mine.seq, { at: NOW + 2500, ok: false, nextAttemptAt: NOW + 10 * MINUTE }),
          ])
        ).refused,
        [mine.seq],
      );
      assert.equal((await row()).attempts, 1);

      // Due again: C claims it and delivers it.
      assert.deepEqual(await claim(c.q, 'node-c', NOW + 10 * MINUTE - 1, NOW + 11 * MINUTE), []);
      const [third] = await claim(c.q, 'node-c', NOW + 10 * MINUTE, NOW + 11 * MINUTE);
      assert.deepEqual(
        { seq: third.seq, attempts: third.attempts, lease_owner: third.lease_owner },
        { seq: mine.seq, attempts: 1, lease_owner: 'node-c' },
      );
      assert.deepEqual(
        (await record(c.q, 'node-c', [outcome(mine.seq, { at: NOW + 10 * MINUTE + 50 })])).recorded,
        [mine.seq],
      );
      assert.deepEqual(await row(), {
        ...takenByB,
        status: 'delivered',
        attempts: 2,
        next_attempt_at: null,
        last_attempt_at: NOW + 10 * MINUTE + 50,
        last_status: 200,
        last_error: null,
        completed_at: NOW + 10 * MINUTE + 50,
        lease_owner: null,
      });
      assert.deepEqual(await health(a.q, endpoint), {
        ...healthBefore,
        failing_since: null,
        last_failure_at: NOW + 2500,
        last_success_at: NOW + 10 * MINUTE + 50,
      });
      // Delivered: no one claims it, no outcome moves it.
      assert.deepEqual(await claim(a.q, 'node-a', NOW + 60 * MINUTE, NOW + 61 * MINUTE), []);
      assert.deepEqual(
        (await record(c.q, 'node-c', [outcome(mine.seq, { ok: false, nextAttemptAt: null })]))
          .refused,
        [mine.seq],
      );
    });
  });

  test('endpoint health: the same failure run, disabling and reasons as SQLite’s markEndpointSuccess / markEndpointFailure for the same 400 outcomes', async () => {
    await withNodes(async ([pool]) => {
      const { q } = pool;
      const project = await newProject(q);
      const endpoint = await newEndpoint(q, project);
      const connection = openDatabase(stateDir(), silentLogger());
      const db = sqliteQueries(connection);
      try {
        await insertProject(db, { id: project, name: 'twin', plan: 'pro', created_at: NOW });
        await insertWebhookEndpoint(db, {
          id: endpoint,
          project_id: project,
          url: 'https://hooks.example/in',
          event_types: null,
          secret: 's',
          created_at: NOW,
        });
        const onSqlite = () =>
          connection
            .prepare(`SELECT ${HEALTH_COLUMNS} FROM webhook_endpoints WHERE id = ?`)
            .get(endpoint) as Health;
        const random = seededRandom(23);
        let at = NOW;
        let disables = 0;
        let okShare = 0.5;
        for (let step = 0; step < 400; step++) {
          // Phases of health and of outage; times advance by 0 to 4 minutes (ties included).
          if (step % 40 === 0) okShare = [0.9, 0.05, 0.5, 0][(step / 40) % 4];
          at += Math.floor(random() * 5) * MINUTE * (random() < 0.8 ? 1 : 0);
          const ok = random() < okShare;
          const error = ok ? null : `HTTP 5${String(step % 100).padStart(2, '0')}`;
          const what = `step ${step}: ${ok ? 'success' : 'failure'} at +${(at - NOW) / MINUTE} min`;
          if (ok) {
            await markEndpointSuccess(db, endpoint, at);
            await markEndpointSuccessPostgres(q, endpoint, at);
          } else {
            const onSqliteReason = await markEndpointFailure(
              db,
              endpoint,
              at,
              DISABLE_AFTER_MS,
              (since) => reasonText(since, error),
            );
            const onPostgresReason = await markEndpointFailurePostgres(
              q,
              endpoint,
              at,
              DISABLE_AFTER_MS,
              (since) => reasonText(since, error),
            );
            assert.equal(onPostgresReason, onSqliteReason, what);
            if (onSqliteReason !== null) disables += 1;
          }
          assert.deepEqual(await health(q, endpoint), onSqlite(), what);
          // An operator re-enables a disabled endpoint a while later.
          if (onSqlite().disabled_at !== null && random() < 0.2) {
            await enableWebhookEndpoint(db, endpoint, at);
            await q.run(
              'UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL WHERE id = ?',
              endpoint,
            );
          }
        }
        assert.ok(disables >= 3, `the sequence disabled the endpoint ${disables} times`);
      } finally {
        connection.close();
      }
    });
  });

  test('a dispatcher’s rounds of claims and outcomes leave the same deliveries, endpoint health and disablings as SQLite’s bookkeeping', async () => {
    await withNodes(async ([node]) => {
      const { q } = node;
      const project = await newProject(q);
      const connection = openDatabase(stateDir(), silentLogger());
      const db = sqliteQueries(connection);
      try {
        await insertProject(db, { id: project, name: 'twin', plan: 'pro', created_at: NOW });
        // One mostly healthy endpoint, one mostly failing; registered in the same order on both.
        const endpoints = ['wh.twin.healthy', 'wh.twin.failing'];
        for (const [i, id] of endpoints.entries()) {
          await insertWebhookEndpoint(db, {
            id,
            project_id: project,
            url: 'https://hooks.example/in',
            event_types: null,
            secret: 's',
            created_at: NOW + i,
          });
          await insertWebhookEndpointPostgres(q, {
            id,
            project_id: project,
            url: 'https://hooks.example/in',
            event_types: null,
            secret: 's',
            created_at: NOW + i,
          });
        }
        for (let i = 0; i < 40; i++) {
          await insertEvent(db, {
            project_id: project,
            message_id: null,
            type: 'mail.sent',
            created_at: NOW,
            data: '{}',
          });
        }
        await insertEvents(q, project, 40);
        const bookkeeping = (work: Partial<WebhookBookkeeping> & { now: number }) =>
          db.transaction((tx) =>
            applyWebhookBookkeeping(tx, {
              outcomes: [],
              disableAfterMs: DISABLE_AFTER_MS,
              fanOut: [],
              cursor: null,
              fanOutQueued: 0,
              node: 'sqlite',
              claims: { room: {}, defaultRoom: 0, minRoom: 1, leaseUntil: work.now },
              prune: null,
              ...work,
            }),
          );
        const events = await eventsAfter(db, 0, 100);
        await bookkeeping({ now: NOW, fanOut: events, cursor: events[events.length - 1].seq });
        assert.equal((await fanOutEventsPostgres(q, { now: NOW, limit: 100 })).deliveries, 80);

        // Deliveries compared by (endpoint, event): their seqs and ids are each store's own.
        type Row = Record<string, unknown> & {
          seq: number;
          endpoint_id: string;
          event_seq: number;
        };
        const COLUMNS =
          'seq, endpoint_id, event_seq, type, status, attempts, next_attempt_at, created_at, last_attempt_at, last_status, last_error, completed_at';
        const key = (r: { endpoint_id: string; event_seq: number | null }) =>
          `${r.endpoint_id} ${r.event_seq}`;
        const table = (rows: Row[]) =>
          new Map(rows.map(({ seq: _seq, ...rest }) => [key(rest as Row), rest]));
        const sqliteSeq = () =>
          new Map(
            (
              connection
                .prepare('SELECT seq, endpoint_id, event_seq FROM webhook_deliveries')
                .all() as Row[]
            ).map((r) => [key(r), r.seq]),
          );
        const postgresSeq = new Map(
          (await q.all<Row>('SELECT seq, endpoint_id, event_seq FROM webhook_deliveries')).map(
            (r) => [key(r), r.seq],
          ),
        );
        const random = seededRandom(7);
        let disabledCount = 0;
        for (let round = 0, now = NOW; round < 40; round++, now += 3 * MINUTE) {
          const leaseUntil = now + MINUTE;
          // Claims: each store's own, for its enabled endpoints, at most 7 each.
          const sqliteClaims = (
            await bookkeeping({ now, claims: { room: {}, defaultRoom: 7, minRoom: 1, leaseUntil } })
          ).claimed.flatMap((c) => c.rows);
          const enabled = (
            await q.all<{ id: string }>(
              'SELECT id FROM webhook_endpoints WHERE disabled_at IS NULL ORDER BY id',
            )
          ).map((e) => e.id);
          const postgresClaims: LeasedDelivery[] = [];
          for (const endpointId of enabled)
            postgresClaims.push(
              ...(await claimDueDeliveriesPostgres(q, {
                endpointId,
                node: node.name,
                now,
                leaseUntil,
                limit: 7,
              })),
            );
          assert.deepEqual(
            postgresClaims.map((d) => `${key(d)} ${d.attempts}`).sort(),
            sqliteClaims.map((d) => `${key(d)} ${d.attempts}`).sort(),
            `round ${round}: claims`,
          );

          // The same outcomes for both, in the same order.
          const outcomes = postgresClaims.map((d, i) => {
            const at = now + 1000 * (i + 1);
            const ok = random() < (d.endpoint_id === endpoints[0] ? 0.7 : 0.03);
            const roll = random();
            const permanent = !ok && roll < 0.1;
            return {
              key: key(d),
              endpointId: d.endpoint_id,
              at,
              ok,
              status: ok ? 200 : permanent ? null : 500,
              error: ok ? null : permanent ? 'the event is no longer in the outbox' : 'HTTP 500',
              nextAttemptAt:
                ok || permanent || roll > 0.9 ? null : at + Math.ceil(random() * 5) * MINUTE,
              countsAgainstEndpoint: !permanent,
              attempt: d.attempts + 1,
              type: d.type,
            };
          });
          const seqs = sqliteSeq();
          const sqliteOutcomes: WebhookOutcomeRecord[] = outcomes.map((o) => ({
            ...o,
            seq: seqs.get(o.key)!,
            deliveryId: `we.${o.key}`,
            durationMs: 10,
          }));
          const sqliteDisabled = (await bookkeeping({ now, outcomes: sqliteOutcomes })).disabled;
          const result = await recordWebhookOutcomesPostgres(q, {
            node: node.name,
            outcomes: outcomes.map((o) => ({ ...o, seq: postgresSeq.get(o.key)! })),
            disableAfterMs: DISABLE_AFTER_MS,
            reason: (since, o) => reasonText(since, o.error),
          });
          assert.deepEqual(result.refused, [], `round ${round}: every outcome is this node's`);
          assert.deepEqual(result.disabled, sqliteDisabled, `round ${round}: disabled`);
          disabledCount += sqliteDisabled.length;

          const onSqlite = table(
            connection.prepare(`SELECT ${COLUMNS} FROM webhook_deliveries`).all() as Row[],
          );
          const onPostgres = table(await q.all<Row>(`SELECT ${COLUMNS} FROM webhook_deliveries`));
          assert.deepEqual(onPostgres, onSqlite, `round ${round}: deliveries`);
          for (const id of endpoints) {
            assert.deepEqual(
              await health(q, id),
              connection
                .prepare(`SELECT ${HEALTH_COLUMNS} FROM webhook_endpoints WHERE id = ?`)
                .get(id),
              `round ${round}: ${id}`,
            );
          }
          assert.equal(
            (await q.get<{ n: number }>(
              'SELECT count(*) AS n FROM webhook_deliveries WHERE lease_owner IS NOT NULL',
            ))!.n,
            0,
            'every lease ended with its outcome',
          );
          // The failing endpoint is re-enabled a few rounds after it is disabled.
          if (round % 8 === 7) {
            for (const id of endpoints) {
              await enableWebhookEndpoint(db, id, now);
              await q.run(
                'UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL WHERE id = ?',
                id,
              );
              await q.run(
                "UPDATE webhook_deliveries SET next_attempt_at = ? WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at > ?",
                now,
                id,
                now,
              );
            }
          }
        }
        assert.ok(disabledCount >= 2, `the failing endpoint was disabled ${disabledCount} times`);
        const statuses = await q.all<{ status: string }>(
          'SELECT DISTINCT status FROM webhook_deliveries ORDER BY status',
        );
        assert.deepEqual(
          statuses.map((s) => s.status),
          ['delivered', 'failed', 'pending'],
          'every ending happened',
        );
      } finally {
        connection.close();
      }
    });
  });

  test('two and three nodes recording one endpoint’s outcomes at once lose none: one disabling, the run kept by time', async () => {
    await withNodes(async (nodes) => {
      const project = await newProject(nodes[0].q);
      const reason = (since: number) => reasonText(since, 'HTTP 500');

      // 60 failures over 20 minutes, in shuffled order, three nodes at once.
      const failing = await newEndpoint(nodes[0].q, project);
      const random = seededRandom(11);
      const times = Array.from({ length: 60 }, (_, i) => NOW + i * 20_000).sort(
        () => random() - 0.5,
      );
      const reasons: string[] = [];
      await Promise.all(
        nodes.map(async (node, n) => {
          for (let i = n; i < times.length; i += nodes.length) {
            const text = await markEndpointFailurePostgres(
              node.q,
              failing,
              times[i],
              DISABLE_AFTER_MS,
              reason,
            );
            if (text !== null) reasons.push(text);
          }
        }),
      );
      const first = Math.min(...times);
      const last = Math.max(...times);
      assert.equal(reasons.length, 1, 'disabled once, its reason given to one node');
      const h = await health(nodes[0].q, failing);
      assert.deepEqual(
        {
          failing_since: h.failing_since,
          last_failure_at: h.last_failure_at,
          disabled_reason: h.disabled_reason,
        },
        { failing_since: first, last_failure_at: last, disabled_reason: reasons[0] },
      );
      assert.ok(h.disabled_at !== null);

      // Successes and failures mixed, two nodes at once, rounds of different orders.
      for (let round = 0; round < 20; round++) {
        const endpoint = await newEndpoint(nodes[0].q, project);
        const outcomes = Array.from(
          { length: 30 },
          (_, i): EndpointOutcome => ({
            endpointId: endpoint,
            at: NOW + i * 1000,
            ok: random() < 0.4,
            error: null,
          }),
        );
        const shuffled = [...outcomes].sort(() => random() - 0.5);
        await Promise.all(
          [0, 1].map(async (n) => {
            for (let i = n; i < shuffled.length; i += 2) {
              const o = shuffled[i];
              if (o.ok) await markEndpointSuccessPostgres(nodes[n].q, endpoint, o.at);
              else
                await markEndpointFailurePostgres(
                  nodes[n].q,
                  endpoint,
                  o.at,
                  DISABLE_AFTER_MS,
                  reason,
                );
            }
          }),
        );
        const successes = outcomes.filter((o) => o.ok).map((o) => o.at);
        const failures = outcomes.filter((o) => !o.ok).map((o) => o.at);
        const lastSuccess = successes.length > 0 ? Math.max(...successes) : null;
        const runSince = failures.filter((f) => lastSuccess === null || f > lastSuccess);
        const got = await health(nodes[0].q, endpoint);
        const what = `round ${round}: ${outcomes.map((o) => (o.ok ? 's' : 'f')).join('')} applied as ${shuffled.map((o) => (o.ok ? 's' : 'f')).join('')}`;
        assert.equal(got.last_success_at, lastSuccess, what);
        assert.equal(got.last_failure_at, failures.length > 0 ? Math.max(...failures) : null, what);
        if (runSince.length === 0)
          assert.equal(got.failing_since, null, `${what}: no failure after the last success`);
        else {
          // The run's start: its true first failure, or (a success having arrived late) a later one, never earlier.
          assert.ok(
            got.failing_since !== null &&
              got.failing_since >= Math.min(...runSince) &&
              got.failing_since <= Math.max(...runSince),
            `${what}: failing_since ${got.failing_since}`,
          );
        }
      }
    });
  });

  test('registering or removing an endpoint waits for a fan-out under way: the new endpoint misses nothing, the removed one keeps nothing pending', async () => {
    await withNodes(async ([a, b, c]) => {
      const project = await newProject(a.q);
      const leaving = await newEndpoint(a.q, project);
      const early = await insertEvents(a.q, project, 3);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let fannedOut!: () => void;
      const underWay = new Promise<void>((resolve) => (fannedOut = resolve));
      // A fan-out whose transaction stays open (inside a dispatcher cycle's, say) until released.
      const fanOut = a.q.transaction(async (tx) => {
        const result = await fanOutEventsPostgres(tx, { now: NOW, limit: 100 });
        fannedOut();
        await gate;
        return result;
      });
      await underWay;
      const joining = `wh.joining.${randomBytes(4).toString('hex')}`;
      const registration = insertWebhookEndpointPostgres(b.q, {
        id: joining,
        project_id: project,
        url: 'https://hooks.example/in',
        event_types: null,
        secret: 's',
        created_at: NOW,
      });
      const removal = removeWebhookEndpointPostgres(c.q, leaving, NOW + 1);
      // Both queue on the endpoint-list lock behind the fan-out.
      for (let polls = 0; ; polls++) {
        const waiting = await a.q.get<{ n: number }>(
          "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        );
        if (waiting!.n === 2) break;
        if (polls === 1000) {
          release();
          assert.fail(
            `after 5 s, ${waiting!.n} of the registration and the removal wait for the fan-out`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      assert.equal(
        await a.q.get('SELECT id FROM webhook_endpoints WHERE id = ?', joining),
        undefined,
        'not registered yet',
      );
      release();
      assert.deepEqual(await fanOut, { events: 3, deliveries: 3 });
      const [registered, removed] = await Promise.all([registration, removal]);
      assert.deepEqual(
        removed,
        { removed: true, cancelled: 3 },
        'the fan-out’s deliveries, committed first, are cancelled',
      );
      assert.ok(
        registered.from_seq >= Math.max(...early),
        'the new endpoint never wanted the events fanned out before it',
      );

      const later = await insertEvents(b.q, project, 2);
      await fanOutAll([a, b, c]);
      assert.deepEqual(
        await deliveryPairs(a.q),
        [...early.map((s) => `${leaving} ${s}`), ...later.map((s) => `${joining} ${s}`)].sort(),
      );
      const left = await a.q.all<{ status: string; last_error: string | null }>(
        'SELECT DISTINCT status, last_error FROM webhook_deliveries WHERE endpoint_id = ?',
        leaving,
      );
      assert.deepEqual(left, [{ status: 'failed', last_error: 'endpoint removed' }]);
      assert.deepEqual(await removeWebhookEndpointPostgres(a.q, leaving, NOW + 2), {
        removed: false,
        cancelled: 0,
      });
    });
  });

  test('a queued event pruned before its fan-out, or of a project without endpoints, leaves the queue with no delivery', async () => {
    await withNodes(async ([a, b]) => {
      const withEndpoint = await newProject(a.q);
      const without = await newProject(a.q);
      await newEndpoint(a.q, withEndpoint);
      const [pruned, kept] = await insertEvents(a.q, withEndpoint, 2);
      await insertEvents(a.q, without, 5);
      // Retention deletes an event the fan-out has not reached yet.
      await a.q.run('DELETE FROM events WHERE seq = ?', pruned);
      assert.deepEqual(await fanOutEventsPostgres(b.q, { now: NOW, limit: 100 }), {
        events: 7,
        deliveries: 1,
      });
      assert.equal(await hasQueuedEventsPostgres(a.q), false);
      assert.deepEqual(
        (await deliveryPairs(a.q)).map((p) => Number(p.split(' ')[1])),
        [kept],
      );
    });
  });

  test('migration 12 queues the events past the old cursor, and every event inserted after it', async () => {
    await withNodes(
      async ([a]) => {
        const project = await newProject(a.q);
        const seqs = await insertEvents(a.q, project, 5);
        await a.q.run('UPDATE webhook_cursor SET event_seq = ?', seqs[2]);
        await migratePostgres(a.pool, silentLogger());
        const queued = async () =>
          (
            await a.q.all<{ event_seq: number }>(
              'SELECT event_seq FROM webhook_fanout_pending ORDER BY event_seq',
            )
          ).map((r) => r.event_seq);
        assert.deepEqual(await queued(), seqs.slice(3));
        const [next] = await insertEvents(a.q, project, 1);
        assert.deepEqual(await queued(), [...seqs.slice(3), next]);
        assert.equal(
          (await a.q.get<{ n: number }>(
            'SELECT count(*) AS n FROM webhook_deliveries WHERE lease_owner IS NOT NULL',
          ))!.n,
          0,
        );
      },
      postgresMigrations.filter((m) => m.version < 12),
    );
  });
});
