import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { createKey, revokeKey } from '../../src/operator/keys.js';
import { getValue } from '../../src/store/queries.js';
import { assertErrorEnvelope } from '../support/assertions.js';
import {
  createProjectWithKeys,
  type HttpResult,
  post,
  startTestNodes,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';
import { storedMimeCountIn } from '../support/storeReads.js';

const SECOND = 1000;
const HOUR = 3600 * SECOND;

/** 429 rate_limited with an integer Retry-After; returns the seconds. */
function assertRateLimited(res: HttpResult, retryAfter?: number): number {
  assertErrorEnvelope(res, 429, 'rate_limit_error', 'rate_limited');
  const header = res.headers.get('retry-after') ?? '';
  assert.match(header, /^[1-9][0-9]*$/, `Retry-After is an integer number of seconds: "${header}"`);
  if (retryAfter !== undefined) assert.equal(Number(header), retryAfter);
  return Number(header);
}

const assert401 = (res: HttpResult, code: string) =>
  assertErrorEnvelope(res, 401, 'authentication_error', code);

function assertAccepted(res: HttpResult): void {
  assert.equal(res.status, 202, res.text);
}

function assertBatch207(res: HttpResult, n: number): void {
  assert.equal(res.status, 207, res.text);
  assert.equal(res.body.data.length, n);
  for (const slot of res.body.data) assert.deepEqual(slot, { id: slot.id, status: 'queued' });
}

describe('rate limits (window 60 s: send 5, batch 2, unauthenticated per IP 3)', () => {
  let p: TestPostern;
  const clock = new ManualClock(Date.parse('2026-07-01T00:00:00Z'));

  before(async () => {
    p = await startTestPostern({
      clock,
      config: {
        rate_limits: {
          window_seconds: 60,
          send_per_key: 5,
          batch_per_key: 2,
          unauthenticated_per_ip: 3,
        },
      },
    });
  });
  after(async () => p.close());

  /** Moves far past every window, so each test starts with empty windows; returns the new now. */
  const freshWindows = () => {
    clock.advance(HOUR);
    return clock.now();
  };
  const send = (key: string | null, message = validMessage(), base = p.production) =>
    post(base, '/v1/send', { key, json: message });
  const batch = (key: string, n = 1) =>
    post(p.production, '/v1/send/batch', {
      key,
      json: { messages: Array.from({ length: n }, (_, i) => validMessage({ subject: `b${i}` })) },
    });
  const stored = async () => ({
    rows: await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages'),
    files: await storedMimeCountIn(p.ctx.store, p.stateDir),
  });

  describe('per-key send window', () => {
    test('the 6th send in the window is 429 rate_limited with a truthful integer Retry-After', async () => {
      const t0 = freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'send window');
      for (let i = 0; i < 5; i++) {
        clock.set(t0 + i * 10 * SECOND);
        assertAccepted(await send(proj.liveKey));
      }
      clock.set(t0 + 45 * SECOND);
      const before = await stored();
      const retryAfter = assertRateLimited(await send(proj.liveKey), 15);
      assert.deepEqual(await stored(), before, 'a rate-limited request stores nothing');

      // Retry-After − 1 seconds later: still refused.
      clock.set(t0 + (45 + retryAfter - 1) * SECOND);
      assertRateLimited(await send(proj.liveKey), 1);
      // Exactly Retry-After seconds after the first refusal: admitted.
      clock.set(t0 + (45 + retryAfter) * SECOND);
      assertAccepted(await send(proj.liveKey));
      // The window slides: the next slot frees when the send at t0+10s leaves it.
      assertRateLimited(await send(proj.liveKey), 10);
      clock.set(t0 + 69 * SECOND);
      assertRateLimited(await send(proj.liveKey), 1);
      clock.set(t0 + 70 * SECOND);
      assertAccepted(await send(proj.liveKey));
    });

    test('Retry-After rounds a fractional wait up, so it stays truthful', async () => {
      const t0 = freshWindows() + 400; // not on a whole second
      clock.set(t0);
      const proj = await createProjectWithKeys(p.ctx, 'fractional');
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj.liveKey));
      clock.set(t0 + 45_300); // 14.7 s left in the window
      const retryAfter = assertRateLimited(await send(proj.liveKey), 15);
      clock.set(t0 + 45_300 + (retryAfter - 1) * SECOND);
      assertRateLimited(await send(proj.liveKey), 1);
      clock.set(t0 + 45_300 + retryAfter * SECOND);
      assertAccepted(await send(proj.liveKey));
    });

    test('refused requests do not extend the window', async () => {
      const t0 = freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'refusals do not count');
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj.liveKey));
      for (let s = 1; s < 60; s += 7) {
        clock.set(t0 + s * SECOND);
        assertRateLimited(await send(proj.liveKey), 60 - s);
      }
      clock.set(t0 + 60 * SECOND);
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj.liveKey));
      assertRateLimited(await send(proj.liveKey), 60);
    });

    test('a rate-limited request with a valid body stores nothing (no row, no file, no usage)', async () => {
      freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'nothing stored');
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj.liveKey));
      const usage = () =>
        getValue<number>(
          p.ctx.store,
          'SELECT SUM(messages) FROM usage_counters WHERE project_id = ?',
          proj.project.id,
        );
      const before = { ...(await stored()), usage: await usage() };
      for (let i = 0; i < 3; i++)
        assertRateLimited(await send(proj.liveKey, validMessage({ subject: `limited ${i}` })));
      assert.deepEqual({ ...(await stored()), usage: await usage() }, before);
      assert.equal(
        await getValue<number>(
          p.ctx.store,
          "SELECT COUNT(*) FROM messages WHERE subject LIKE 'limited %'",
        ),
        0,
      );
    });

    test('windows are per key: a second key of the same project is unaffected', async () => {
      freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'per key');
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj.liveKey));
      assertRateLimited(await send(proj.liveKey));
      const second = (await createKey(p.ctx, proj.project.id, 'live')).key;
      for (let i = 0; i < 5; i++) assertAccepted(await send(second));
      assertRateLimited(await send(second));
      // The project's test key on the sandbox has its own window too.
      for (let i = 0; i < 5; i++)
        assert.equal((await send(proj.testKey, validMessage(), p.sandbox)).status, 202);
    });

    test('send and batch windows are independent', async () => {
      freshWindows();
      const a = await createProjectWithKeys(p.ctx, 'send then batch');
      for (let i = 0; i < 5; i++) assertAccepted(await send(a.liveKey));
      assertRateLimited(await send(a.liveKey));
      assertBatch207(await batch(a.liveKey, 2), 2);
      assertBatch207(await batch(a.liveKey, 2), 2);
      const before = await stored();
      assertRateLimited(await batch(a.liveKey, 3));
      assert.deepEqual(await stored(), before, 'a rate-limited batch stores nothing');

      const b = await createProjectWithKeys(p.ctx, 'batch then send');
      assertBatch207(await batch(b.liveKey), 1);
      assertBatch207(await batch(b.liveKey), 1);
      assertRateLimited(await batch(b.liveKey));
      for (let i = 0; i < 5; i++) assertAccepted(await send(b.liveKey));
      assertRateLimited(await send(b.liveKey));
    });

    test('the batch window has a truthful Retry-After', async () => {
      const t0 = freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'batch retry');
      assertBatch207(await batch(proj.liveKey), 1);
      clock.set(t0 + 20 * SECOND);
      assertBatch207(await batch(proj.liveKey), 1);
      clock.set(t0 + 25 * SECOND);
      const retryAfter = assertRateLimited(await batch(proj.liveKey), 35);
      clock.set(t0 + (25 + retryAfter - 1) * SECOND);
      assertRateLimited(await batch(proj.liveKey), 1);
      clock.set(t0 + (25 + retryAfter) * SECOND);
      assertBatch207(await batch(proj.liveKey), 1);
    });
  });

  describe('unauthenticated per-IP window', () => {
    test('missing, malformed and unknown keys count; from the 4th, bad requests get 429 until the window passes, while valid keys of that IP are served', async () => {
      const t0 = freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'ip window');
      const revoked = await createKey(p.ctx, proj.project.id, 'live');
      await revokeKey(p.ctx, revoked.id);

      assert401(await send(null), 'missing_api_key');
      clock.set(t0 + 10 * SECOND);
      assert401(
        await post(p.production, '/v1/send', {
          headers: { authorization: 'Bearer not-a-key' },
          json: validMessage(),
        }),
        'missing_api_key',
      );
      clock.set(t0 + 20 * SECOND);
      assert401(await send(`ps_live_${'A1b2C3d4E5'.repeat(4)}`), 'invalid_api_key');

      clock.set(t0 + 30 * SECOND);
      const before = await stored();
      assertRateLimited(await send(revoked.key), 30);
      assertRateLimited(await send(null), 30);
      assert.deepEqual(await stored(), before);
      // Rate budgets are per key: a valid key from the same IP (behind the same NAT) is served,
      // on send and batch, and spends none of the IP's window.
      assertAccepted(await send(proj.liveKey));
      assertBatch207(await batch(proj.liveKey), 1);
      assertRateLimited(await send(revoked.key), 30);

      clock.set(t0 + 59 * SECOND);
      assertRateLimited(await send(null), 1);
      clock.set(t0 + 60 * SECOND);
      // The window slides: one slot freed; a bad request takes it, then the IP is full again.
      assert401(await send(revoked.key), 'invalid_api_key');
      assertRateLimited(await send(null), 10);
      assertAccepted(await send(proj.liveKey));
      clock.set(t0 + 70 * SECOND);
      assert401(await send(null), 'missing_api_key');
    });

    test('revoked, expired and mode-mismatched keys count in the IP window, on send and batch alike', async () => {
      freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'ip window kinds');
      const revoked = await createKey(p.ctx, proj.project.id, 'live');
      await revokeKey(p.ctx, revoked.id);
      const expiring = await createKey(
        p.ctx,
        proj.project.id,
        'live',
        new Date(clock.now() + 60 * SECOND).toISOString(),
      );
      clock.advance(HOUR);

      assert401(await send(revoked.key), 'invalid_api_key');
      assert401(
        await post(p.production, '/v1/send/batch', {
          key: expiring.key,
          json: { messages: [validMessage()] },
        }),
        'key_expired',
      );
      assert401(await send(proj.testKey), 'mode_mismatch');
      assertRateLimited(await send(revoked.key));
      assertRateLimited(
        await post(p.production, '/v1/send/batch', {
          key: proj.testKey,
          json: { messages: [validMessage()] },
        }),
      );
      assertAccepted(await send(proj.liveKey));
    });

    test('a rate-limited bad request is not counted again (the window does not extend)', async () => {
      const t0 = freshWindows();
      for (let i = 0; i < 3; i++) assert401(await send(null), 'missing_api_key');
      for (let s = 5; s < 60; s += 11) {
        clock.set(t0 + s * SECOND);
        assertRateLimited(await send(null), 60 - s);
      }
      clock.set(t0 + 60 * SECOND);
      for (let i = 0; i < 3; i++) assert401(await send(null), 'missing_api_key');
      assertRateLimited(await send(null), 60);
    });

    test('valid-key requests never consume the IP window', async () => {
      freshWindows();
      const proj = await createProjectWithKeys(p.ctx, 'valid keys and ip');
      const second = (await createKey(p.ctx, proj.project.id, 'live')).key;
      // 10 valid requests (5 per key), plus valid requests refused by their own key window and
      // valid requests refused by body validation.
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj.liveKey));
      for (let i = 0; i < 5; i++) assertAccepted(await send(second));
      assertRateLimited(await send(proj.liveKey));
      assertRateLimited(await send(second));
      const third = (await createKey(p.ctx, proj.project.id, 'live')).key;
      assert.equal((await send(third, { from: 'bad' })).status, 422);
      assert.equal((await post(p.production, '/v1/send', { key: third, raw: '{' })).status, 400);
      assertBatch207(await batch(proj.liveKey), 1);
      // The IP window is untouched: 3 bad requests are still 401, the 4th is the first 429.
      for (let i = 0; i < 3; i++) assert401(await send(null), 'missing_api_key');
      assertRateLimited(await send(null));
    });
  });
});

describe('two nodes on one PostgreSQL count one window (send 5, batch 2, unauthenticated per IP 3)', {
  skip: postgresUnavailable(),
}, () => {
  let a: TestPostern;
  let b: TestPostern;
  let close: () => Promise<void>;
  const clock = new ManualClock(Date.parse('2026-07-01T00:00:00Z'));

  before(async () => {
    ({
      nodes: [a, b],
      close,
    } = await startTestNodes(2, {
      clock,
      config: {
        rate_limits: {
          window_seconds: 60,
          send_per_key: 5,
          batch_per_key: 2,
          unauthenticated_per_ip: 3,
        },
      },
    }));
  });
  after(async () => close?.());

  test('sends spread over both nodes get 5 per window in all, and the Retry-After either node gives is truthful', async () => {
    const t0 = clock.now();
    const proj = await createProjectWithKeys(a.ctx, 'two nodes, one window');
    const nodes = [a, b, a, b, a];
    for (const [i, node] of nodes.entries()) {
      clock.set(t0 + i * 10 * SECOND);
      assertAccepted(
        await post(node.production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
      );
    }
    clock.set(t0 + 45 * SECOND);
    assertRateLimited(
      await post(b.production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
      15,
    );
    assertRateLimited(
      await post(a.production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
      15,
    );
    clock.set(t0 + 60 * SECOND);
    assertAccepted(
      await post(b.production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
    );
    assertRateLimited(
      await post(a.production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
      10,
    );
  });

  test('concurrent sends on both nodes: exactly 5 admitted', async () => {
    clock.advance(HOUR);
    const proj = await createProjectWithKeys(a.ctx, 'two nodes at once');
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        post((i % 2 ? a : b).production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
      ),
    );
    assert.equal(results.filter((r) => r.status === 202).length, 5);
    for (const r of results.filter((r) => r.status !== 202)) assertRateLimited(r);
  });

  test('batches: 2 per window across the nodes', async () => {
    clock.advance(HOUR);
    const proj = await createProjectWithKeys(a.ctx, 'two nodes, batches');
    const batch = (node: TestPostern) =>
      post(node.production, '/v1/send/batch', {
        key: proj.liveKey,
        json: { messages: [validMessage()] },
      });
    assertBatch207(await batch(a), 1);
    assertBatch207(await batch(b), 1);
    assertRateLimited(await batch(a), 60);
    assertRateLimited(await batch(b), 60);
  });

  test('requests without a valid key: 3 per IP across the nodes, then 429 on both', async () => {
    clock.advance(HOUR);
    for (const node of [a, b, a])
      assert401(
        await post(node.production, '/v1/send', { key: null, json: validMessage() }),
        'missing_api_key',
      );
    assertRateLimited(
      await post(b.production, '/v1/send', { key: null, json: validMessage() }),
      60,
    );
    assertRateLimited(
      await post(a.production, '/v1/send', { key: null, json: validMessage() }),
      60,
    );
  });
});
