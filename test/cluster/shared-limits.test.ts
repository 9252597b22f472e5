/**
 * Three Postern nodes on one PostgreSQL (CLUSTER.md, "Exact shared limits"): real processes on
 * one database, requests spread over them at once. Ids come from one space across nodes and
 * doors; an Idempotency-Key sent to every node stores one message; a daily cap admits exactly
 * its number; a key revoked through one node is refused by the others on their next request.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey } from '../../src/operator/keys.js';
import { showProject } from '../../src/operator/projects.js';
import { allValues, getValue, type SqlParam } from '../../src/store/queries.js';
import { assertErrorEnvelope } from '../support/assertions.js';
import { type Cluster, type ClusterNode, startCluster } from '../support/cluster.js';
import { plan, withPlans } from '../support/plans.js';
import {
  createProjectWithKeys,
  type HttpResult,
  type ProjectWithKeys,
  post,
  runCli,
  validMessage,
} from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';
import { sleep } from '../support/processes.js';
import { authedSession, rawMessage, rawSend } from '../support/rawSmtp.js';

const ID_RE = /^m\.[0-9a-z]{26}$/;
const QUEUED = /^250 2\.0\.0 OK queued as (\S+)$/;
const DAY_MS = 86_400_000;

/** Seconds until 00:00 UTC after `now`, as the daily cap's Retry-After gives them. */
const secondsToMidnight = (now: number) => Math.ceil((DAY_MS - (now % DAY_MS)) / 1000);

describe('three nodes on one PostgreSQL share one id space and exact limits', {
  skip: postgresUnavailable(),
}, () => {
  let cluster: Cluster;
  let nodes: ClusterNode[];

  before(async () => {
    cluster = await startCluster(['node-a', 'node-b', 'node-c'], {
      ...withPlans({ cap100d: plan({ monthly_messages: 100_000, daily_messages: 100 }) }),
      // Accepted messages stay queued: these tests are about the doors.
      delivery: { enabled: false },
    });
    nodes = cluster.nodes;
  });
  after(async () => cluster?.close());

  const count = async (sql: string, ...args: SqlParam[]) =>
    (await getValue<number>(cluster.ctx.store, sql, ...args))!;
  const send = (
    node: ClusterNode,
    key: string,
    json: unknown,
    headers: Record<string, string> = {},
  ) => post(node.production, '/v1/send', { key, json, headers });

  describe('one id space', () => {
    test('HTTP sends, batches and SMTP messages accepted concurrently by three nodes get distinct ids of one form, each stored once', async () => {
      const proj = await createProjectWithKeys(cluster.ctx, 'ids');
      const SENDS = 60;
      const BATCHES = 2;
      const PER_BATCH = 10;
      const SESSIONS = 4;
      const PER_SESSION = 10;
      const perNode = async (node: ClusterNode, n: number): Promise<string[]> => {
        const doors = await Promise.all([
          ...Array.from({ length: SENDS }, async (_, i) => {
            const res = await send(node, proj.liveKey, validMessage({ subject: `http ${n}.${i}` }));
            assert.equal(res.status, 202, res.text);
            return [res.body.id as string];
          }),
          ...Array.from({ length: BATCHES }, async (_, i) => {
            const messages = Array.from({ length: PER_BATCH }, (_, j) =>
              validMessage({ subject: `batch ${n}.${i}.${j}` }),
            );
            const res = await post(node.production, '/v1/send/batch', {
              key: proj.liveKey,
              json: { messages },
            });
            assert.equal(res.status, 207, res.text);
            assert.deepEqual(
              res.body.data.map((slot: { status: string }) => slot.status),
              Array(PER_BATCH).fill('queued'),
              res.text,
            );
            return res.body.data.map((slot: { id: string }) => slot.id) as string[];
          }),
          // SMTP sessions, each sending its messages one after another.
          ...Array.from({ length: SESSIONS }, async (_, i) => {
            const session = await authedSession(node.smtp, proj.liveKey);
            try {
              const got: string[] = [];
              for (let j = 0; j < PER_SESSION; j++) {
                const reply = await rawSend(
                  session,
                  'app@example.com',
                  ['ann@example.org'],
                  rawMessage({ subject: `smtp ${n}.${i}.${j}` }),
                );
                const m = QUEUED.exec(reply);
                assert.ok(m, `expected "250 2.0.0 OK queued as …", got ${JSON.stringify(reply)}`);
                got.push(m[1]);
              }
              return got;
            } finally {
              await session.quit();
            }
          }),
        ]);
        return doors.flat();
      };
      const ids = (await Promise.all(nodes.map((node, n) => perNode(node, n)))).flat();

      assert.equal(
        ids.length,
        nodes.length * (SENDS + BATCHES * PER_BATCH + SESSIONS * PER_SESSION),
      );
      assert.deepEqual(
        ids.filter((id) => !ID_RE.test(id)),
        [],
        'every id is m. and 26 of [0-9a-z]',
      );
      assert.equal(new Set(ids).size, ids.length, 'no id given twice');
      // Exactly the acknowledged messages, each one row.
      assert.deepEqual(
        await allValues<string>(
          cluster.ctx.store,
          'SELECT id FROM messages WHERE project_id = ? ORDER BY id',
          proj.project.id,
        ),
        [...ids].sort(),
      );
    });
  });

  describe('Idempotency-Key across nodes', () => {
    let seq = 0;
    /** A fresh project and a fresh Idempotency-Key per test. */
    const fresh = async (label: string) => ({
      proj: await createProjectWithKeys(cluster.ctx, `idempotency ${label}`),
      key: `cluster-${label}-${++seq}-${Date.now().toString(36)}`.slice(0, 40),
    });
    /** What one project holds, every table an acceptance writes. */
    const held = async (proj: ProjectWithKeys) => ({
      messages: await count('SELECT COUNT(*) FROM messages WHERE project_id = ?', proj.project.id),
      events: await count('SELECT COUNT(*) FROM events WHERE project_id = ?', proj.project.id),
      idempotency_keys: await count(
        'SELECT COUNT(*) FROM idempotency_keys WHERE project_id = ?',
        proj.project.id,
      ),
      bodies: await count(
        'SELECT COUNT(DISTINCT c.message_id) FROM message_body_chunks c JOIN messages m ON m.id = c.message_id WHERE m.project_id = ?',
        proj.project.id,
      ),
    });
    const ONE = { messages: 1, events: 1, idempotency_keys: 1, bodies: 1 };
    /** `perNode` requests to each node at once, the i-th (over all nodes) with body `bodyOf(i)`. */
    const everywhere = (
      proj: ProjectWithKeys,
      key: string,
      perNode: number,
      bodyOf: (i: number) => unknown,
    ) =>
      Promise.all(
        Array.from({ length: nodes.length * perNode }, (_, i) =>
          send(nodes[i % nodes.length], proj.liveKey, bodyOf(i), { 'idempotency-key': key }),
        ),
      );

    const assertAllSame202 = (results: HttpResult[]) => {
      for (const res of results) {
        assert.equal(res.status, 202, res.text);
        assert.equal(res.text, results[0].text, 'every 202 is the same bytes');
      }
    };

    test('one key sent to all three nodes at once (10 requests each, one body) stores one message, and every 202 is the same bytes', async () => {
      const { proj, key } = await fresh('same');
      const results = await everywhere(proj, key, 10, () => validMessage({ subject: 'once' }));
      assertAllSame202(results);
      assert.match(results[0].body.id, ID_RE);
      assert.deepEqual(await held(proj), ONE);
      assert.equal(
        await getValue<string>(
          cluster.ctx.store,
          'SELECT id FROM messages WHERE project_id = ? AND idempotency_key = ?',
          proj.project.id,
          key,
        ),
        results[0].body.id,
      );
    });

    test('one key with a different body per request on all three nodes at once stores one of them, the one every 202 describes', async () => {
      const { proj, key } = await fresh('differ');
      const results = await everywhere(proj, key, 10, (i) =>
        validMessage({ subject: `Subject ${i}`, category: `cat-${i}`, paused: i % 2 === 0 }),
      );
      assertAllSame202(results);
      assert.deepEqual(await held(proj), ONE);
      const row = (await cluster.ctx.store.get<{
        id: string;
        subject: string;
        category: string;
        status: string;
      }>(
        'SELECT id, subject, category, status FROM messages WHERE project_id = ?',
        proj.project.id,
      ))!;
      const i = Number(row.subject.replace('Subject ', ''));
      assert.deepEqual(row, {
        id: results[0].body.id,
        subject: `Subject ${i}`,
        category: `cat-${i}`,
        status: i % 2 === 0 ? 'paused' : 'queued',
      });
      assert.equal(results[0].body.category, row.category);
      assert.equal(results[0].body.status, row.status);
    });

    test('one key on all three nodes at once, half the bodies invalid: one message, every 202 the same, every other answer subject:required', async () => {
      const { proj, key } = await fresh('mixed');
      const { subject: _subject, ...noSubject } = validMessage();
      const results = await everywhere(proj, key, 10, (i) =>
        i % 2 === 0 ? noSubject : validMessage({ subject: `ok ${i}` }),
      );
      const accepted = results.filter((r) => r.status === 202);
      // Every valid request is answered 202 (an invalid one too once the key is stored).
      assert.ok(
        accepted.length >= results.length / 2,
        `${accepted.length} of ${results.length} answered 202`,
      );
      assertAllSame202(accepted);
      for (const res of results.filter((r) => r.status !== 202)) {
        assert.equal(res.status, 422, res.text);
        assert.equal(res.body.error.code, 'subject:required', res.text);
      }
      assert.deepEqual(await held(proj), ONE);
    });
  });

  describe('daily send cap across nodes', () => {
    test('200 concurrent sends over three nodes against a daily cap of 100: exactly 100 accepted, 100 refused with daily_send_cap_exceeded, 100 stored', async () => {
      // The cap is per UTC day: a run straddling 00:00 would count in two days.
      const toMidnight = DAY_MS - (Date.now() % DAY_MS);
      if (toMidnight < 30_000) await sleep(toMidnight + 1000);
      const proj = await createProjectWithKeys(cluster.ctx, 'cap 100 a day', 'cap100d');
      const before = Date.now();
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          send(nodes[i % nodes.length], proj.liveKey, validMessage({ subject: `c${i}` })),
        ),
      );
      const after = Date.now();

      const accepted = results.filter((r) => r.status === 202);
      const refused = results.filter((r) => r.status !== 202);
      assert.equal(accepted.length, 100);
      assert.equal(refused.length, 100);
      for (const r of accepted) assert.equal(r.body.status, 'queued', r.text);
      for (const r of refused) {
        assertErrorEnvelope(r, 429, 'rate_limit_error', 'daily_send_cap_exceeded');
        const retryAfter = Number(r.headers.get('retry-after'));
        assert.ok(
          retryAfter >= secondsToMidnight(after) && retryAfter <= secondsToMidnight(before),
          `Retry-After ${r.headers.get('retry-after')}: the seconds to 00:00 UTC`,
        );
      }
      assert.deepEqual(
        await allValues<string>(
          cluster.ctx.store,
          'SELECT id FROM messages WHERE project_id = ? ORDER BY id',
          proj.project.id,
        ),
        accepted.map((r) => r.body.id as string).sort(),
        'exactly the 100 accepted messages are stored',
      );
      assert.equal(
        await count(
          'SELECT COUNT(DISTINCT c.message_id) FROM message_body_chunks c JOIN messages m ON m.id = c.message_id WHERE m.project_id = ?',
          proj.project.id,
        ),
        100,
      );
      const usage = (await showProject(cluster.ctx, proj.project.id)).usage;
      assert.equal(usage.day.messages, 100);
      assert.equal(usage.month.messages, 100);
    });
  });

  describe('key revocation across nodes', () => {
    test("a key revoked through node A (the CLI with A's config) is refused by B and C on their very next request, right after each served one with it", async () => {
      const [a, b, c] = nodes;
      const proj = await createProjectWithKeys(cluster.ctx, 'revoked through a node');
      const doomed = await createKey(cluster.ctx, proj.project.id, 'live');
      // Each node serves the key over HTTP, and an SMTP session on B and on C sends a message with it.
      const sessions = await Promise.all(
        [b, c].map((node) => authedSession(node.smtp, doomed.key)),
      );
      try {
        for (const node of [a, b, c])
          assert.equal((await send(node, doomed.key, validMessage())).status, 202);
        for (const session of sessions)
          assert.match(
            await rawSend(session, 'sender@example.com', ['rcpt@example.org'], rawMessage()),
            QUEUED,
          );

        const revoked = await runCli(['key', 'revoke', doomed.id, '--json'], a.env);
        assert.equal(revoked.code, 0, revoked.stderr);

        for (const node of [b, c])
          assertErrorEnvelope(
            await send(node, doomed.key, validMessage()),
            401,
            'authentication_error',
            'invalid_api_key',
          );
        for (const session of sessions)
          assert.match(
            await session.command('MAIL FROM:<sender@example.com>'),
            /^535 5\.7\.8 invalid_api_key: /,
          );
        assertErrorEnvelope(
          await send(a, doomed.key, validMessage()),
          401,
          'authentication_error',
          'invalid_api_key',
        );
      } finally {
        await Promise.all(sessions.map((s) => s.quit()));
      }
      // The project's other key works on every node.
      for (const node of [a, b, c])
        assert.equal((await send(node, proj.liveKey, validMessage())).status, 202);
      assert.equal(
        await count('SELECT COUNT(*) FROM messages WHERE project_id = ?', proj.project.id),
        3 + 2 + 3,
      );
    });
  });
});
