/**
 * A request's policy rows on PostgreSQL (CLUSTER.md: policy changes act on the next request on
 * every node): served from the node's cache, and checked against the database's policy
 * generation by the statement the request sends anyway, its rate window's take. An Admission
 * on a pool of its own (the node's), the database changed through another pool (as by another
 * node, the CLI, or an administrator's psql), and every statement the node's pool sends listed.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import pg from 'pg';
import { ManualClock } from '../../src/clock.js';
import { ContractError } from '../../src/contract/errors.js';
import { silentLogger } from '../../src/log.js';
import { Admission } from '../../src/policy/admission.js';
import { createApiKey } from '../../src/policy/apiKeys.js';
import { checkProjectPolicy, type PolicyFacts } from '../../src/policy/projectPolicy.js';
import { RateWindowFactory } from '../../src/policy/rateWindowFactory.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { insertProject } from '../../src/store/projects.js';
import { insertProviderAccount } from '../../src/store/providerAccounts.js';
import type { Queries } from '../../src/store/queries.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  startTestNodes,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  sharedPostgres,
  testPool,
} from '../support/postgres.js';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);
const IP = '192.0.2.7';
const FACTS: PolicyFacts = {
  to: [{ email: 'rcpt@example.org' }],
  cc: [],
  bcc: [],
  routing: { provider: null },
};
const RATE_LIMITS = {
  window_seconds: 60,
  send_per_key: 1000,
  batch_per_key: 1000,
  unauthenticated_per_ip: 1000,
  viewer_per_ip: 1000,
};

describe('policy reads on PostgreSQL: from the node cache, checked in the rate window take', {
  skip: postgresUnavailable(),
}, () => {
  let database: FreshDatabase;
  let nodePool: pg.Pool;
  let otherPool: pg.Pool;
  /** The node's store, and the statements its pool has sent (their text). */
  let node: Queries;
  let sent: string[];
  /** Another process's connection to the same database. */
  let other: Queries;
  const clock = new ManualClock(NOW);
  let serial = 0;

  before(async () => {
    database = await freshDatabase((await sharedPostgres()).url);
    nodePool = testPool(database.url, 4);
    otherPool = testPool(database.url, 2);
    await migratePostgres(otherPool, silentLogger());
    const query = nodePool.query.bind(nodePool) as (config: unknown) => Promise<unknown>;
    nodePool.query = ((config: string | { text: string }) => {
      sent.push(typeof config === 'string' ? config : config.text);
      return query(config);
    }) as unknown as typeof nodePool.query;
    node = postgresQueries(nodePool);
    other = postgresQueries(otherPool);
  });
  after(async () => {
    await nodePool?.end();
    await otherPool?.end();
    await database?.drop();
  });
  beforeEach(() => {
    sent = [];
  });

  /** A project with an attached provider and a live key, made through the other connection. */
  async function project(): Promise<{
    projectId: string;
    keyId: string;
    key: string;
    accountId: string;
  }> {
    const projectId = `p.reads${++serial}`;
    await insertProject(other, {
      id: projectId,
      name: `reads ${serial}`,
      plan: 'pro',
      created_at: NOW,
    });
    const accountId = `pa.reads${serial}`;
    await insertProviderAccount(other, {
      id: accountId,
      project_id: projectId,
      slug: 'smtp',
      settings: { host: '127.0.0.1', port: 9, tls: 'none' },
      secrets: {},
      priority: 0,
      free_quota: null,
      created_at: NOW,
    } as Parameters<typeof insertProviderAccount>[1]);
    const { row, key } = await createApiKey(other, projectId, 'live', NOW, null);
    return { projectId, keyId: row.id, key, accountId };
  }

  function admission(rateLimits = RATE_LIMITS): Admission {
    return new Admission(
      node,
      clock,
      { rate_limits: rateLimits, policy: { enabled: true } },
      new RateWindowFactory(node, clock),
    );
  }

  const refusal = (code: string) => (err: unknown) =>
    err instanceof ContractError && err.code === code;
  const readsPolicyGeneration = (text: string) => /FROM policy_generation/.test(text);

  test("a key the node has served is admitted, and its project's providers checked, with no statement but the take (which reads the policy generation) and the suppression read", async () => {
    const { key } = await project();
    const doors = admission();
    await checkProjectPolicy(
      node,
      await doors.admit(IP, `Bearer ${key}`, 'production', 'send'),
      FACTS,
    );
    sent = [];
    const auth = await doors.admit(IP, `Bearer ${key}`, 'production', 'send');
    await checkProjectPolicy(node, auth, FACTS);
    assert.equal(sent.length, 2, sent.join('\n'));
    assert.match(sent[0], /rate_window_write/);
    assert.match(
      sent[0],
      /FROM policy_generation/,
      'the take reads the generation in its own statement',
    );
    assert.match(sent[1], /FROM suppressions/);
    // An SMTP session's next message: the same.
    sent = [];
    await checkProjectPolicy(node, await doors.readmit(key, 'production', 'send'), FACTS);
    assert.deepEqual(
      sent.filter((text) => !/rate_window_write|FROM suppressions/.test(text)),
      [],
    );
  });

  test('a key revoked in the database by hand (through no Postern process) is refused by the very next request, HTTP and SMTP, 401 before 429', async () => {
    const { key, keyId } = await project();
    const doors = admission({ ...RATE_LIMITS, send_per_key: 1 });
    await doors.admit(IP, `Bearer ${key}`, 'production', 'send');
    await other.run('UPDATE api_keys SET revoked_at = ? WHERE id = ?', NOW, keyId);
    // The window is spent too: the revocation is answered first.
    await assert.rejects(
      doors.admit(IP, `Bearer ${key}`, 'production', 'send'),
      refusal('invalid_api_key'),
    );
    await assert.rejects(doors.readmit(key, 'production', 'send'), refusal('invalid_api_key'));
  });

  test('a project paused, then its provider detached, by hand are seen by the next request: its context says paused, then the project has no provider', async () => {
    const { key, projectId, accountId } = await project();
    const doors = admission();
    const before = await doors.admit(IP, `Bearer ${key}`, 'production', 'send');
    await checkProjectPolicy(node, before, FACTS);
    assert.equal(before.project.paused, 0);

    await other.run('UPDATE projects SET paused = 1 WHERE id = ?', projectId);
    sent = [];
    const paused = await doors.admit(IP, `Bearer ${key}`, 'production', 'send');
    assert.equal(paused.project.paused, 1);
    assert.ok(
      sent.some(readsPolicyGeneration),
      'the changed generation made the node read the key again',
    );

    await other.run('UPDATE provider_accounts SET detached_at = ? WHERE id = ?', NOW, accountId);
    await assert.rejects(
      checkProjectPolicy(node, await doors.admit(IP, `Bearer ${key}`, 'production', 'send'), FACTS),
      refusal('no_providers_configured'),
    );
  });
});

/** A statement a Postern node sent (its pool's connections are named `postern <node>`), and whether inside a transaction. */
interface NodeStatement {
  text: string;
  inTransaction: boolean;
}

/** Every statement Postern's connections send until `stop` is called (pg's Client.query, which every pool query and transaction goes through). */
function recordNodeStatements(): { statements: NodeStatement[]; stop(): void } {
  const statements: NodeStatement[] = [];
  const original = pg.Client.prototype.query;
  const inTransaction = new WeakMap<object, boolean>();
  pg.Client.prototype.query = function (
    this: pg.Client & { connectionParameters?: { application_name?: string } },
    ...args: unknown[]
  ) {
    const config = args[0] as string | { text: string };
    const text = typeof config === 'string' ? config : config.text;
    if (this.connectionParameters?.application_name?.startsWith('postern ')) {
      if (/^\s*BEGIN\b/i.test(text)) inTransaction.set(this, true);
      statements.push({ text, inTransaction: inTransaction.get(this) ?? false });
      if (/^\s*(COMMIT|ROLLBACK)\b/i.test(text)) inTransaction.set(this, false);
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  return { statements, stop: () => (pg.Client.prototype.query = original) };
}

describe('one HTTP send to a node on PostgreSQL', { skip: postgresUnavailable() }, () => {
  let cluster: Awaited<ReturnType<typeof startTestNodes>>;
  let node: TestPostern;
  let proj: ProjectWithKeys;

  before(async () => {
    cluster = await startTestNodes(1);
    node = cluster.nodes[0];
    proj = await createProjectWithKeys(node.ctx, 'one send');
  });
  after(async () => cluster?.close());

  test('sends no statement of its own outside its commit group but the rate window take: its key and providers come from the cache, its suppressions and caps are read in the group', async () => {
    assert.equal(
      (await post(node.production, '/v1/send', { key: proj.liveKey, json: validMessage() })).status,
      202,
      'a first send fills the cache',
    );
    const recording = recordNodeStatements();
    let status: number;
    try {
      status = (
        await post(node.production, '/v1/send', { key: proj.liveKey, json: validMessage() })
      ).status;
    } finally {
      recording.stop();
    }
    assert.equal(status, 202);
    // The node's background work (heartbeat, webhook polls) touches none of these tables.
    const request =
      /policy_generation|api_keys|provider_accounts|projects|suppressions|sender_domains|usage_counters|rate_window/;
    const outside = recording.statements
      .filter((s) => !s.inTransaction && request.test(s.text))
      .map((s) => s.text);
    assert.equal(outside.length, 1, outside.join('\n'));
    assert.match(outside[0], /rate_window_write/);
    const inGroup = recording.statements.filter(
      (s) => s.inTransaction && /FROM suppressions/.test(s.text),
    );
    assert.equal(inGroup.length, 1, "the suppressions read with the unit's other facts");
  });
});
