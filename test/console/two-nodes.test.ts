/**
 * The console on two nodes of one PostgreSQL (issue 23): two `postern start` processes, each
 * with its own console listener, share operator sessions, the audit log, the nodes' rows and
 * the failed sign-in limits, since all of them are rows of the one database. Real processes,
 * real sockets.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { systemClock } from '../../src/clock.js';
import { buildConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import {
  ConsoleClient,
  expectError,
  expectStatus,
  operatorAccount,
  PASSWORD,
} from '../support/console.js';
import type { HttpResult, SpawnedPostern } from '../support/postern.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  sharedPostgres,
  testPool,
} from '../support/postgres.js';
import { ProcessScope } from '../support/processes.js';

const EMAIL = 'owner@example.com';
/** Failed sign-ins allowed per email and per client address in the window (console.sign_in_*). */
const PER_ACCOUNT = 3;
const PER_IP = 4;
const WINDOW_SECONDS = 600;

/**
 * A node's config: a send door and a console, on ports of their own; small sign-in limits, and
 * the test as the trusted proxy, so each test names its client address (X-Forwarded-For).
 */
function nodeConfig(dir: string): string {
  const file = path.join(dir, 'node.json');
  writeFileSync(
    file,
    JSON.stringify({
      listeners: [
        {
          name: 'http-production',
          protocol: 'http',
          environment: 'production',
          host: '127.0.0.1',
          port: 0,
        },
        { name: 'console', protocol: 'console', host: '127.0.0.1', port: 0 },
      ],
      delivery: { enabled: false },
      http: { trusted_proxies: ['127.0.0.1'] },
      console: {
        sign_in_failures_per_account: PER_ACCOUNT,
        sign_in_failures_per_ip: PER_IP,
        sign_in_window_seconds: WINDOW_SECONDS,
      },
    }),
  );
  return file;
}

const consoleOf = (node: SpawnedPostern) =>
  node.listeners.find((l) => l.protocol === 'console')!.url;

/** Another node's client carrying the same session cookie and CSRF token. */
function sameSessionOn(base: string, signedIn: ConsoleClient): ConsoleClient {
  const client = new ConsoleClient(base);
  client.cookie = signedIn.cookie;
  client.csrf = signedIn.csrf;
  return client;
}

/** A sign-in attempt from `address` (behind the trusted proxy). */
const signInFrom = (base: string, address: string, email: string, password: string) =>
  new ConsoleClient(base).post(
    '/session',
    { email, password },
    { headers: { 'x-forwarded-for': address } },
  );

/**
 * A 429 sign_in_throttled whose Retry-After is within the window, give or take its rounding up:
 * among attempts sent at once, one node may read its clock a few milliseconds before the other
 * writes the event it must wait for (then window + a few ms, rounded up to the next second).
 */
function expectThrottled(res: HttpResult): void {
  expectError(res, 429, 'sign_in_throttled');
  const retryAfter = Number(res.headers.get('retry-after'));
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= WINDOW_SECONDS + 1,
    `Retry-After ${res.headers.get('retry-after')}`,
  );
}

/** An operator whose password is guessed many times at once. */
const RACED = 'raced@example.com';
/** An operator whose session is stolen: its current password guessed through one node, sign-ins through the other. */
const STOLEN = 'stolen@example.com';

/** Where each email's failed sign-ins go, attempt by attempt: the limit's worth on one node, or spread. */
const SPREADS = [
  { email: 'all-on-a@example.com', nodes: 'AAA' },
  { email: 'spread-aba@example.com', nodes: 'ABA' },
  { email: 'spread-bba@example.com', nodes: 'BBA' },
];

describe('the console on two nodes of one PostgreSQL', { skip: postgresUnavailable() }, () => {
  const scope = new ProcessScope();
  let database: FreshDatabase;
  let a: SpawnedPostern;
  let b: SpawnedPostern;

  before(async () => {
    database = await freshDatabase((await sharedPostgres()).url);
    const pool = testPool(database.url, 2);
    try {
      await migratePostgres(pool, silentLogger());
      const config = buildConfig({ state_dir: '/nonexistent' }, {});
      const ctx = {
        store: postgresQueries(pool),
        clock: systemClock,
        config,
        spoolRoot: '/nonexistent',
      };
      for (const email of [EMAIL, RACED, STOLEN, ...SPREADS.map((s) => s.email)])
        await operatorAccount(ctx, email, 'owner');
    } finally {
      await pool.end();
    }
    [a, b] = await Promise.all(
      ['node-a', 'node-b'].map((id) => {
        const dir = scope.stateDir(`postern-${id}-`);
        return scope.spawn(dir, {
          POSTERN_CONFIG: nodeConfig(dir),
          POSTERN_STORE_BACKEND: 'postgres',
          POSTERN_DATABASE_URL: database.url,
          POSTERN_NODE_ID: id,
        });
      }),
    );
  });
  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
    await scope.cleanup();
    await database?.drop();
  });

  test("a session signed in through node A's console works on node B's, its CSRF token included; signed out through B, it is gone on A", async () => {
    const onA = await ConsoleClient.signIn(consoleOf(a), EMAIL, PASSWORD);
    const onB = sameSessionOn(consoleOf(b), onA);
    assert.equal(expectStatus(await onB.get('/session'), 200).operator.email, EMAIL);
    // A state-changing request through B, proven by the session's CSRF token.
    const project = expectStatus(
      await onB.post('/projects', { name: 'made on b', plan: 'pro' }),
      201,
    );
    assert.equal(expectStatus(await onA.get(`/projects/${project.id}`), 200).name, 'made on b');
    assert.equal((await onB.delete('/session')).status, 204);
    expectError(await onA.get('/session'), 401, 'unauthenticated');
  });

  test('an audit entry written through node A is listed through node B', async () => {
    const onA = await ConsoleClient.signIn(consoleOf(a), EMAIL, PASSWORD);
    const project = expectStatus(
      await onA.post('/projects', { name: 'audited on a', plan: 'pro' }),
      201,
    );
    const onB = await ConsoleClient.signIn(consoleOf(b), EMAIL, PASSWORD);
    const entries = expectStatus(await onB.get('/audit?action=project.create'), 200).entries;
    const entry = entries.find((e: { target: string }) => e.target === project.id);
    assert.ok(entry, `project.create of ${project.id} in ${JSON.stringify(entries)}`);
    assert.deepEqual([entry.actor_email, entry.client_ip], [EMAIL, '127.0.0.1']);
  });

  test('GET /nodes on either node lists both, up', async () => {
    for (const node of [a, b]) {
      const client = await ConsoleClient.signIn(consoleOf(node), EMAIL, PASSWORD);
      const { nodes } = expectStatus(await client.get('/nodes'), 200);
      assert.deepEqual(
        nodes.map((n: { id: string; state: string; pid: number }) => [n.id, n.state, n.pid]),
        [
          ['node-a', 'up', a.child.pid],
          ['node-b', 'up', b.child.pid],
        ],
      );
    }
  });

  describe('failed sign-ins count together on both nodes', () => {
    const nodeOf = (letter: string) => (letter === 'A' ? a : b);

    for (const [k, { email, nodes }] of SPREADS.entries()) {
      const address = (i: number) => `198.51.100.${10 * k + i}`;
      test(`${PER_ACCOUNT} failed sign-ins for one email on nodes ${nodes.split('').join(', ')}: the next attempt is refused 429 sign_in_throttled with Retry-After on either node, the right password included`, async () => {
        // Each failure from an address of its own: only the email's window fills.
        for (const [i, letter] of [...nodes].entries()) {
          expectError(
            await signInFrom(
              consoleOf(nodeOf(letter)),
              address(i + 1),
              email,
              'not the password at all',
            ),
            401,
            'invalid_credentials',
          );
        }
        for (const node of [a, b]) {
          expectThrottled(await signInFrom(consoleOf(node), address(8), email, PASSWORD));
          expectThrottled(
            await signInFrom(consoleOf(node), address(9), email, 'not the password at all'),
          );
        }
        // Another email from the same address is not held by it.
        expectStatus(await signInFrom(consoleOf(b), address(1), EMAIL, PASSWORD), 201);
      });
    }

    test(`${PER_IP} failed sign-ins from one address spread over nodes A and B (other emails each): its next attempt is refused 429 on either node, the right password included; another address is not held`, async () => {
      const address = '203.0.113.7';
      for (let i = 0; i < PER_IP; i++) {
        expectError(
          await signInFrom(
            consoleOf(i % 2 === 0 ? a : b),
            address,
            `sprayed-${i}@example.com`,
            'not the password at all',
          ),
          401,
          'invalid_credentials',
        );
      }
      for (const node of [a, b])
        expectThrottled(await signInFrom(consoleOf(node), address, EMAIL, PASSWORD));
      for (const node of [a, b])
        expectStatus(await signInFrom(consoleOf(node), '203.0.113.8', EMAIL, PASSWORD), 201);
    });

    /** The answers of attempts sent at once, by status: each a 401 invalid_credentials or a 429 sign_in_throttled with Retry-After. */
    function tally(answers: HttpResult[]): Record<number, number> {
      const counts: Record<number, number> = {};
      for (const res of answers) {
        if (res.status === 401) expectError(res, 401, 'invalid_credentials');
        else expectThrottled(res);
        counts[res.status] = (counts[res.status] ?? 0) + 1;
      }
      return counts;
    }

    test(`20 wrong passwords for one email sent at once, spread over nodes A and B (an address each): exactly ${PER_ACCOUNT} are checked and answered 401 in all, the other ${20 - PER_ACCOUNT} 429 sign_in_throttled with Retry-After; the right password is then refused on either node`, async () => {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          signInFrom(
            consoleOf(i % 2 === 0 ? a : b),
            `192.0.2.${i + 1}`,
            RACED,
            'not the password at all',
          ),
        ),
      );
      assert.deepEqual(tally(answers), { 401: PER_ACCOUNT, 429: 20 - PER_ACCOUNT });
      for (const node of [a, b])
        expectThrottled(await signInFrom(consoleOf(node), '192.0.2.99', RACED, PASSWORD));
    });

    test(`wrong current passwords of a session (PUT /session/password) through node A and failed sign-ins through node B fill one window: ${PER_ACCOUNT - 1} + 1, then both are refused 429 on either node, the right password included`, async () => {
      const onA = await ConsoleClient.signIn(consoleOf(a), STOLEN, PASSWORD);
      const onB = sameSessionOn(consoleOf(b), onA);
      const change = (client: ConsoleClient, address: string, current: string) =>
        client.put(
          '/session/password',
          { current_password: current, new_password: 'another long password' },
          { headers: { 'x-forwarded-for': address } },
        );
      for (let i = 0; i < PER_ACCOUNT - 1; i++)
        expectError(
          await change(onA, `192.0.2.${150 + i}`, 'not the password at all'),
          422,
          'current_password:invalid_value',
        );
      expectError(
        await signInFrom(consoleOf(b), '192.0.2.160', STOLEN, 'not the password at all'),
        401,
        'invalid_credentials',
      );
      for (const [i, session] of [onA, onB].entries()) {
        expectThrottled(await change(session, `192.0.2.${170 + i}`, PASSWORD));
        expectThrottled(await signInFrom(session.base, `192.0.2.${180 + i}`, STOLEN, PASSWORD));
      }
    });

    test(`20 wrong passwords from one address sent at once over both nodes, for 20 emails: exactly ${PER_IP} answered 401 in all, the other ${20 - PER_IP} 429`, async () => {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          signInFrom(
            consoleOf(i % 2 === 0 ? a : b),
            '192.0.2.200',
            `raced-${i}@example.com`,
            'not the password at all',
          ),
        ),
      );
      assert.deepEqual(tally(answers), { 401: PER_IP, 429: 20 - PER_IP });
    });
  });
});
