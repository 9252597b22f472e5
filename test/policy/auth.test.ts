import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { createKey, revokeKey } from '../../src/operator/keys.js';
import { deleteProject, setPaused } from '../../src/operator/projects.js';
import { getValue } from '../../src/store/queries.js';
import {
  cliEnv,
  createProjectWithKeys,
  type HttpResult,
  post,
  runCli,
  startTestNodes,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';
import { storedMimeCountIn } from '../support/storeReads.js';

const ENDPOINTS = ['/v1/send', '/v1/send/batch'] as const;

type Endpoint = (typeof ENDPOINTS)[number];

const ALNUM40 = 'AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd';

/** A valid body for either endpoint, so only authentication can fail. */
function bodyFor(endpoint: Endpoint): unknown {
  return endpoint === '/v1/send' ? validMessage() : { messages: [validMessage()] };
}

function assert401(res: HttpResult, code: string): void {
  assert.equal(res.status, 401, `expected 401 ${code}, got ${res.status} ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(typeof res.body?.error?.message, 'string');
  assert.ok(res.body.error.message.length > 0);
  assert.deepEqual(res.body, {
    error: { type: 'authentication_error', code, message: res.body.error.message },
  });
}

interface StoreCounts {
  messages: number;
  events: number;
  idempotency_keys: number;
  stored_mime: number;
}

async function storeCounts(p: TestPostern): Promise<StoreCounts> {
  const count = async (table: string) =>
    (await getValue<number>(p.ctx.store, `SELECT COUNT(*) FROM ${table}`))!;
  return {
    messages: await count('messages'),
    events: await count('events'),
    idempotency_keys: await count('idempotency_keys'),
    stored_mime: await storedMimeCountIn(p.ctx.store, p.stateDir),
  };
}

describe('authentication (401 authentication_error)', () => {
  let p: TestPostern;
  let liveKey: string;
  let testKey: string;

  before(async () => {
    p = await startTestPostern();
    ({ liveKey, testKey } = await createProjectWithKeys(p.ctx, 'auth project'));
  });
  after(async () => p.close());

  for (const endpoint of ENDPOINTS) {
    describe(`POST ${endpoint}`, () => {
      test('no Authorization header gives missing_api_key', async () => {
        assert401(
          await post(p.production, endpoint, { json: bodyFor(endpoint) }),
          'missing_api_key',
        );
        assert401(await post(p.sandbox, endpoint, { json: bodyFor(endpoint) }), 'missing_api_key');
      });

      test('an empty Authorization header gives missing_api_key', async () => {
        assert401(
          await post(p.production, endpoint, {
            json: bodyFor(endpoint),
            headers: { authorization: '' },
          }),
          'missing_api_key',
        );
      });

      test('a Basic Authorization header gives missing_api_key, even carrying a valid key', async () => {
        const basic = Buffer.from(`${liveKey}:`).toString('base64');
        assert401(
          await post(p.production, endpoint, {
            json: bodyFor(endpoint),
            headers: { authorization: `Basic ${basic}` },
          }),
          'missing_api_key',
        );
        assert401(
          await post(p.production, endpoint, {
            json: bodyFor(endpoint),
            headers: { authorization: `Basic ${liveKey}` },
          }),
          'missing_api_key',
        );
      });

      test('a valid key without the Bearer scheme gives missing_api_key', async () => {
        assert401(
          await post(p.production, endpoint, {
            json: bodyFor(endpoint),
            headers: { authorization: liveKey },
          }),
          'missing_api_key',
        );
      });

      test('"Bearer" with no key gives missing_api_key', async () => {
        assert401(
          await post(p.production, endpoint, {
            json: bodyFor(endpoint),
            headers: { authorization: 'Bearer' },
          }),
          'missing_api_key',
        );
        assert401(
          await post(p.production, endpoint, {
            json: bodyFor(endpoint),
            headers: { authorization: 'Bearer ' },
          }),
          'missing_api_key',
        );
      });

      const malformed: [string, string][] = [
        ['an unknown prefix', `ps_prod_${ALNUM40}`],
        ['no prefix at all', ALNUM40],
        ['an upper-case prefix', `PS_LIVE_${ALNUM40}`],
        ['39 characters after the prefix', `ps_live_${ALNUM40.slice(0, 39)}`],
        ['41 characters after the prefix', `ps_live_${ALNUM40}x`],
        ['41 characters after the test prefix', `ps_test_${ALNUM40}x`],
        ['a non-alphanumeric character', `ps_live_${ALNUM40.slice(0, 39)}-`],
        [
          'an underscore inside the random part',
          `ps_live_${ALNUM40.slice(0, 20)}_${ALNUM40.slice(21)}`,
        ],
        ['a non-ASCII letter', `ps_live_${ALNUM40.slice(0, 39)}é`],
        ['two tokens', `ps_live_${ALNUM40} extra`],
      ];
      for (const [what, key] of malformed) {
        test(`a bearer key with ${what} gives missing_api_key`, async () => {
          assert401(
            await post(p.production, endpoint, {
              json: bodyFor(endpoint),
              headers: { authorization: `Bearer ${key}` },
            }),
            'missing_api_key',
          );
        });
      }

      test('a well-formed key that matches no key gives invalid_api_key', async () => {
        assert401(
          await post(p.production, endpoint, {
            key: `ps_live_${ALNUM40}`,
            json: bodyFor(endpoint),
          }),
          'invalid_api_key',
        );
        assert401(
          await post(p.sandbox, endpoint, { key: `ps_test_${ALNUM40}`, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
      });

      test('a key differing from a real one in its last character gives invalid_api_key', async () => {
        const last = liveKey.at(-1) === 'a' ? 'b' : 'a';
        assert401(
          await post(p.production, endpoint, {
            key: liveKey.slice(0, -1) + last,
            json: bodyFor(endpoint),
          }),
          'invalid_api_key',
        );
      });

      test('a revoked key gives invalid_api_key, on its own host and on the other', async () => {
        const project = (await createProjectWithKeys(p.ctx, 'revoked')).project;
        const live = await createKey(p.ctx, project.id, 'live');
        const test = await createKey(p.ctx, project.id, 'test');
        assert.equal(
          (await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) })).status,
          endpoint === '/v1/send' ? 202 : 207,
        );
        await revokeKey(p.ctx, live.id);
        await revokeKey(p.ctx, test.id);
        assert401(
          await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
        assert401(
          await post(p.sandbox, endpoint, { key: test.key, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
        // invalid is checked before the mode: a revoked live key on the sandbox is still invalid.
        assert401(
          await post(p.sandbox, endpoint, { key: live.key, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
      });

      test('a key revoked by another process (the CLI) is refused on the very next request, right after requests it made', async () => {
        const project = (await createProjectWithKeys(p.ctx, 'revoked elsewhere')).project;
        const live = await createKey(p.ctx, project.id, 'live');
        const ok = endpoint === '/v1/send' ? 202 : 207;
        assert.equal(
          (await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) })).status,
          ok,
        );
        assert.equal(
          (await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) })).status,
          ok,
        );
        const revoked = await runCli(['key', 'revoke', live.id, '--json'], cliEnv(p));
        assert.equal(revoked.code, 0, revoked.stderr);
        assert401(
          await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
      });

      test("revoking one key leaves the project's other keys working", async () => {
        const project = (await createProjectWithKeys(p.ctx, 'two keys')).project;
        const first = await createKey(p.ctx, project.id, 'live');
        const second = await createKey(p.ctx, project.id, 'live');
        await revokeKey(p.ctx, first.id);
        assert401(
          await post(p.production, endpoint, { key: first.key, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
        assert.equal(
          (await post(p.production, endpoint, { key: second.key, json: bodyFor(endpoint) })).status,
          endpoint === '/v1/send' ? 202 : 207,
        );
      });

      test('every key of a deleted project gives invalid_api_key', async () => {
        const {
          project,
          liveKey: live,
          testKey: test,
        } = await createProjectWithKeys(p.ctx, 'to delete');
        assert.equal(
          (await post(p.sandbox, endpoint, { key: test, json: bodyFor(endpoint) })).status,
          endpoint === '/v1/send' ? 202 : 207,
        );
        await deleteProject(p.ctx, project.id);
        assert401(
          await post(p.production, endpoint, { key: live, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
        assert401(
          await post(p.sandbox, endpoint, { key: test, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
        assert401(
          await post(p.production, endpoint, { key: test, json: bodyFor(endpoint) }),
          'invalid_api_key',
        );
      });

      test('a live key on the sandbox gives mode_mismatch', async () => {
        assert401(
          await post(p.sandbox, endpoint, { key: liveKey, json: bodyFor(endpoint) }),
          'mode_mismatch',
        );
      });

      test('a test key on production gives mode_mismatch', async () => {
        assert401(
          await post(p.production, endpoint, { key: testKey, json: bodyFor(endpoint) }),
          'mode_mismatch',
        );
      });

      test('authentication is checked before the body: a bad key with an unparseable body is a 401', async () => {
        assert401(await post(p.production, endpoint, { raw: '{not json' }), 'missing_api_key');
        assert401(
          await post(p.production, endpoint, { key: `ps_live_${ALNUM40}`, raw: '{not json' }),
          'invalid_api_key',
        );
        assert401(
          await post(p.production, endpoint, { key: testKey, raw: '{not json' }),
          'mode_mismatch',
        );
        assert401(
          await post(p.production, endpoint, { key: testKey, json: { nonsense: true } }),
          'mode_mismatch',
        );
        assert401(
          await post(p.production, endpoint, {
            key: testKey,
            raw: 'plain',
            headers: { 'content-type': 'text/plain' },
          }),
          'mode_mismatch',
        );
      });

      test('authentication is checked before the Idempotency-Key header', async () => {
        assert401(
          await post(p.production, endpoint, {
            json: bodyFor(endpoint),
            headers: { 'idempotency-key': 'short' },
          }),
          'missing_api_key',
        );
        assert401(
          await post(p.sandbox, endpoint, {
            key: liveKey,
            json: bodyFor(endpoint),
            headers: { 'idempotency-key': 'bad key!!!!!!' },
          }),
          'mode_mismatch',
        );
      });
    });
  }

  test('a 401 stores nothing: no message row, event, idempotency key or spool file', async () => {
    const { liveKey: live, testKey: test } = await createProjectWithKeys(p.ctx, 'nothing stored');
    const before = await storeCounts(p);
    const idem = { 'idempotency-key': 'auth-nothing-stored-1' };
    for (const endpoint of ENDPOINTS) {
      assert401(
        await post(p.production, endpoint, { json: bodyFor(endpoint), headers: idem }),
        'missing_api_key',
      );
      assert401(
        await post(p.production, endpoint, {
          json: bodyFor(endpoint),
          headers: { ...idem, authorization: `Basic ${ALNUM40}` },
        }),
        'missing_api_key',
      );
      assert401(
        await post(p.production, endpoint, {
          key: `ps_live_${ALNUM40}`,
          json: bodyFor(endpoint),
          headers: idem,
        }),
        'invalid_api_key',
      );
      assert401(
        await post(p.production, endpoint, { key: test, json: bodyFor(endpoint), headers: idem }),
        'mode_mismatch',
      );
      assert401(
        await post(p.sandbox, endpoint, { key: live, json: bodyFor(endpoint), headers: idem }),
        'mode_mismatch',
      );
    }
    assert.deepEqual(await storeCounts(p), before);
    // The Idempotency-Key was not consumed by the refused requests.
    const ok = await post(p.production, '/v1/send', {
      key: live,
      json: validMessage(),
      headers: idem,
    });
    assert.equal(ok.status, 202);
    assert.equal((await storeCounts(p)).messages, before.messages + 1);
  });
});

describe('authentication with expiring keys (ManualClock)', () => {
  const HOUR = 3600_000;
  let clock: ManualClock;
  let p: TestPostern;

  before(async () => {
    clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
    p = await startTestPostern({ clock });
  });
  after(async () => p.close());

  for (const endpoint of ENDPOINTS) {
    test(`${endpoint}: a key works until its expiry, then gives key_expired`, async () => {
      const project = (await createProjectWithKeys(p.ctx, 'expiring')).project;
      const expires = new Date(clock.now() + HOUR).toISOString();
      const live = await createKey(p.ctx, project.id, 'live', expires);
      const test = await createKey(p.ctx, project.id, 'test', expires);
      const okStatus = endpoint === '/v1/send' ? 202 : 207;
      assert.equal(
        (await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) })).status,
        okStatus,
      );
      assert.equal(
        (await post(p.sandbox, endpoint, { key: test.key, json: bodyFor(endpoint) })).status,
        okStatus,
      );

      clock.advance(HOUR - 1);
      assert.equal(
        (await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) })).status,
        okStatus,
      );

      clock.advance(2); // just past the expiry instant
      assert401(
        await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) }),
        'key_expired',
      );

      clock.advance(HOUR);
      const before = await storeCounts(p);
      assert401(
        await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) }),
        'key_expired',
      );
      assert401(
        await post(p.sandbox, endpoint, { key: test.key, json: bodyFor(endpoint) }),
        'key_expired',
      );
      assert.deepEqual(await storeCounts(p), before);
    });

    test(`${endpoint}: expiry is checked before the mode (an expired live key on the sandbox is key_expired)`, async () => {
      const project = (await createProjectWithKeys(p.ctx, 'expired order')).project;
      const live = await createKey(
        p.ctx,
        project.id,
        'live',
        new Date(clock.now() + HOUR).toISOString(),
      );
      assert401(
        await post(p.sandbox, endpoint, { key: live.key, json: bodyFor(endpoint) }),
        'mode_mismatch',
      );
      clock.advance(2 * HOUR);
      assert401(
        await post(p.sandbox, endpoint, { key: live.key, json: bodyFor(endpoint) }),
        'key_expired',
      );
    });

    test(`${endpoint}: revocation is checked before expiry (a revoked, expired key is invalid_api_key)`, async () => {
      const project = (await createProjectWithKeys(p.ctx, 'revoked and expired')).project;
      const live = await createKey(
        p.ctx,
        project.id,
        'live',
        new Date(clock.now() + HOUR).toISOString(),
      );
      await revokeKey(p.ctx, live.id);
      clock.advance(2 * HOUR);
      assert401(
        await post(p.production, endpoint, { key: live.key, json: bodyFor(endpoint) }),
        'invalid_api_key',
      );
    });

    test(`${endpoint}: a key without an expiry keeps working as the clock moves on`, async () => {
      const { liveKey: live } = await createProjectWithKeys(p.ctx, 'no expiry');
      clock.advance(365 * 24 * HOUR);
      assert.equal(
        (await post(p.production, endpoint, { key: live, json: bodyFor(endpoint) })).status,
        endpoint === '/v1/send' ? 202 : 207,
      );
    });
  }
});

describe("two nodes on one PostgreSQL: a policy change made through one acts on the other's very next request", {
  skip: postgresUnavailable(),
}, () => {
  let a: TestPostern;
  let b: TestPostern;
  let close: () => Promise<void>;

  before(async () => {
    ({
      nodes: [a, b],
      close,
    } = await startTestNodes(2));
  });
  after(async () => close?.());

  for (const endpoint of ENDPOINTS) {
    const ok = endpoint === '/v1/send' ? 202 : 207;

    test(`${endpoint}: a key revoked through one node is refused by the other at once, right after requests it served`, async () => {
      const project = (await createProjectWithKeys(a.ctx, 'revoked on a node')).project;
      const live = await createKey(a.ctx, project.id, 'live');
      const other = await createKey(a.ctx, project.id, 'live');
      for (let i = 0; i < 3; i++)
        assert.equal(
          (await post(b.production, endpoint, { key: live.key, json: bodyFor(endpoint) })).status,
          ok,
        );
      await revokeKey(a.ctx, live.id);
      assert401(
        await post(b.production, endpoint, { key: live.key, json: bodyFor(endpoint) }),
        'invalid_api_key',
      );
      assert401(
        await post(a.production, endpoint, { key: live.key, json: bodyFor(endpoint) }),
        'invalid_api_key',
      );
      // The project's other key is untouched on both nodes.
      assert.equal(
        (await post(b.production, endpoint, { key: other.key, json: bodyFor(endpoint) })).status,
        ok,
      );
      assert.equal(
        (await post(a.production, endpoint, { key: other.key, json: bodyFor(endpoint) })).status,
        ok,
      );
    });
  }

  test("a project paused through one node holds the other node's very next send, and resumed, the one after", async () => {
    const { project, liveKey } = await createProjectWithKeys(a.ctx, 'paused on a node');
    const status = async () => {
      const res = await post(b.production, '/v1/send', { key: liveKey, json: validMessage() });
      assert.equal(res.status, 202, res.text);
      return res.body.status as string;
    };
    assert.equal(await status(), 'queued');
    await setPaused(a.ctx, project.id, true);
    assert.equal(await status(), 'paused');
    await setPaused(a.ctx, project.id, false);
    assert.equal(await status(), 'queued');
  });

  test('a project deleted through one node is refused by the other at once', async () => {
    const { project, liveKey } = await createProjectWithKeys(a.ctx, 'deleted on a node');
    assert.equal(
      (await post(b.production, '/v1/send', { key: liveKey, json: validMessage() })).status,
      202,
    );
    await deleteProject(a.ctx, project.id);
    assert401(
      await post(b.production, '/v1/send', { key: liveKey, json: validMessage() }),
      'invalid_api_key',
    );
  });
});
