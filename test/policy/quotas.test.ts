import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { changePlan, showProject } from '../../src/operator/projects.js';
import { getValue } from '../../src/store/queries.js';
import { assertAccepted, assertErrorEnvelope } from '../support/assertions.js';
import { plan, withPlans } from '../support/plans.js';
import {
  createProjectWithKeys,
  type HttpResult,
  type ProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeCountIn } from '../support/storeReads.js';

const assert402 = (
  res: HttpResult,
  code: 'monthly_quota_exceeded' | 'throughput_quota_exceeded',
) => {
  assertErrorEnvelope(res, 402, 'quota_error', code);
  assert.equal(res.headers.get('retry-after'), null, 'a 402 is a billing state, not a retry hint');
};

const messageCount = async (p: TestPostern, projectId: string) =>
  (await getValue<number>(
    p.ctx.store,
    'SELECT COUNT(*) FROM messages WHERE project_id = ?',
    projectId,
  ))!;
const storedMimeCount = (p: TestPostern) => storedMimeCountIn(p.ctx.store, p.stateDir);
const sizeOf = async (p: TestPostern, id: string) =>
  (await getValue<number>(p.ctx.store, 'SELECT size_bytes FROM messages WHERE id = ?', id))!;

describe('plan quotas (ManualClock)', () => {
  let p: TestPostern;
  const clock = new ManualClock(Date.parse('2026-01-15T12:00:00Z'));

  before(async () => {
    p = await startTestPostern({
      clock,
      config: {
        ...withPlans({
          five: plan({ monthly_messages: 5 }),
          paid3: plan({ monthly_messages: 3, overage: true }),
          big: plan({ monthly_messages: 1000 }),
          daily3: plan({ monthly_messages: 5, daily_messages: 3 }),
          stingy: plan({ monthly_messages: 1, daily_messages: 1, monthly_bytes: 1 }),
          cap100m: plan({ monthly_messages: 100 }),
          cap100d: plan({ monthly_messages: 100_000, daily_messages: 100 }),
        }),
      },
    });
  });
  after(async () => p.close());

  const send = (
    proj: ProjectWithKeys,
    message = validMessage(),
    env: 'production' | 'sandbox' = 'production',
  ) =>
    post(env === 'production' ? p.production : p.sandbox, '/v1/send', {
      key: env === 'production' ? proj.liveKey : proj.testKey,
      json: message,
    });

  describe('monthly_quota_exceeded', () => {
    test('a plan without overage accepts exactly monthly_messages, then answers 402 and stores nothing', async () => {
      clock.set('2026-01-15T12:00:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'five', 'five');
      for (let i = 0; i < 5; i++)
        assertAccepted(await send(proj, validMessage({ subject: `m${i}` })));
      const before = {
        rows: await messageCount(p, proj.project.id),
        files: await storedMimeCount(p),
        usage: (await showProject(p.ctx, proj.project.id)).usage,
      };
      assert402(await send(proj, validMessage({ subject: 'sixth' })), 'monthly_quota_exceeded');
      assert402(await send(proj, validMessage({ subject: 'seventh' })), 'monthly_quota_exceeded');
      assert.deepEqual(
        {
          rows: await messageCount(p, proj.project.id),
          files: await storedMimeCount(p),
          usage: (await showProject(p.ctx, proj.project.id)).usage,
        },
        before,
      );
      assert.equal(before.rows, 5);
      assert.equal(before.usage.month.messages, 5);
      assert.equal(before.usage.month.overage_messages, 0);
    });

    test('a repeated Idempotency-Key still gets its original 202 once the quota is spent', async () => {
      clock.set('2026-01-15T12:00:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'idempotent repeat', 'five');
      const headers = { 'idempotency-key': 'quota-repeat-0001' };
      const first = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage(),
        headers,
      });
      assertAccepted(first);
      for (let i = 0; i < 4; i++) assertAccepted(await send(proj));
      assert402(await send(proj), 'monthly_quota_exceeded');
      const repeat = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage(),
        headers,
      });
      assert.equal(repeat.status, 202, repeat.text);
      assert.deepEqual(repeat.body, first.body);
      assert.equal(await messageCount(p, proj.project.id), 5);
      assert.equal((await showProject(p.ctx, proj.project.id)).usage.month.messages, 5);
    });

    test('a paid plan (overage) accepts past the quota and counts the excess as overage', async () => {
      clock.set('2026-01-15T12:00:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'paid', 'paid3');
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj));
      const usage = (await showProject(p.ctx, proj.project.id)).usage;
      assert.equal(usage.month.messages, 5);
      assert.equal(usage.month.overage_messages, 2);
      assert.equal(await messageCount(p, proj.project.id), 5);
    });

    test('changePlan to a bigger plan lifts the 402 on the very next request', async () => {
      clock.set('2026-01-15T12:00:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'upgrade', 'five');
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj));
      assert402(await send(proj), 'monthly_quota_exceeded');
      await changePlan(p.ctx, proj.project.id, 'big');
      assertAccepted(await send(proj));
      assert.equal((await showProject(p.ctx, proj.project.id)).usage.month.messages, 6);
      await changePlan(p.ctx, proj.project.id, 'five');
      assert402(await send(proj), 'monthly_quota_exceeded');
    });

    test('the month roll-over (00:00 UTC on the 1st) lifts it', async () => {
      clock.set('2026-01-31T23:59:59Z');
      const proj = await createProjectWithKeys(p.ctx, 'rollover', 'five');
      for (let i = 0; i < 5; i++) assertAccepted(await send(proj));
      assert402(await send(proj), 'monthly_quota_exceeded');
      clock.set('2026-01-31T23:59:59.999Z');
      assert402(await send(proj), 'monthly_quota_exceeded');
      clock.set('2026-02-01T00:00:00Z');
      assertAccepted(await send(proj));
      const usage = (await showProject(p.ctx, proj.project.id)).usage;
      assert.deepEqual(
        { period: usage.month.period, messages: usage.month.messages },
        { period: '2026-02', messages: 1 },
      );
    });
  });

  describe('daily_send_cap_exceeded', () => {
    test('the daily ceiling refuses with 429 and a Retry-After of the seconds until 00:00 UTC; it resets at midnight', async () => {
      clock.set('2026-03-10T21:15:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'daily', 'daily3');
      for (let i = 0; i < 3; i++) assertAccepted(await send(proj));
      const before = {
        rows: await messageCount(p, proj.project.id),
        files: await storedMimeCount(p),
      };
      const refused = await send(proj);
      assertErrorEnvelope(refused, 429, 'rate_limit_error', 'daily_send_cap_exceeded');
      assert.equal(refused.headers.get('retry-after'), String(2 * 3600 + 45 * 60));
      clock.set('2026-03-10T23:59:59Z');
      const last = await send(proj);
      assertErrorEnvelope(last, 429, 'rate_limit_error', 'daily_send_cap_exceeded');
      assert.equal(last.headers.get('retry-after'), '1');
      assert.deepEqual(
        { rows: await messageCount(p, proj.project.id), files: await storedMimeCount(p) },
        before,
      );
      clock.set('2026-03-11T00:00:00Z');
      assertAccepted(await send(proj));
      const usage = (await showProject(p.ctx, proj.project.id)).usage;
      assert.equal(usage.day.messages, 1);
      assert.equal(usage.month.messages, 4, 'the daily reset does not reset the monthly counter');
    });

    test('the daily counter reset does not reset the monthly quota', async () => {
      clock.set('2026-03-20T10:00:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'daily then monthly', 'daily3');
      for (let i = 0; i < 3; i++) assertAccepted(await send(proj));
      assertErrorEnvelope(await send(proj), 429, 'rate_limit_error', 'daily_send_cap_exceeded');
      clock.set('2026-03-21T10:00:00Z');
      assertAccepted(await send(proj));
      assertAccepted(await send(proj));
      // 5 this month: the monthly quota (checked before the daily one) refuses, though today has room.
      assert402(await send(proj), 'monthly_quota_exceeded');
      const usage = (await showProject(p.ctx, proj.project.id)).usage;
      assert.equal(usage.day.messages, 2);
      assert.equal(usage.month.messages, 5);
    });
  });

  describe('the sandbox is not metered', () => {
    test('with the production quota spent, the sandbox still accepts, and sandbox sends add no usage', async () => {
      clock.set('2026-04-02T08:00:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'sandbox unmetered', 'daily3');
      for (let i = 0; i < 3; i++) assertAccepted(await send(proj));
      assertErrorEnvelope(await send(proj), 429, 'rate_limit_error', 'daily_send_cap_exceeded');
      const usage = (await showProject(p.ctx, proj.project.id)).usage;
      for (let i = 0; i < 6; i++)
        assertAccepted(await send(proj, validMessage(), 'sandbox'), 'captured');
      assert.deepEqual((await showProject(p.ctx, proj.project.id)).usage, usage);
      assert.equal(usage.month.messages, 3);
      assert.equal(await messageCount(p, proj.project.id), 9);
    });

    test('a plan no production message fits (1 byte) still lets the sandbox accept', async () => {
      clock.set('2026-04-02T08:00:00Z');
      const proj = await createProjectWithKeys(p.ctx, 'stingy', 'stingy');
      assert402(await send(proj), 'throughput_quota_exceeded');
      for (let i = 0; i < 3; i++)
        assertAccepted(await send(proj, validMessage(), 'sandbox'), 'captured');
      const usage = (await showProject(p.ctx, proj.project.id)).usage;
      assert.deepEqual([usage.month.messages, usage.month.bytes, usage.day.messages], [0, 0, 0]);
    });
  });

  describe('concurrency: caps are never overshot', () => {
    for (const [planName, label] of [
      ['cap100m', 'monthly_messages 100'],
      ['cap100d', 'daily_messages 100'],
    ] as const) {
      test(`200 concurrent sends against ${label} accept exactly 100 and refuse exactly 100`, async () => {
        clock.set('2026-05-05T05:05:05Z');
        const proj = await createProjectWithKeys(p.ctx, `concurrent ${planName}`, planName);
        const filesBefore = await storedMimeCount(p);
        const results = await Promise.all(
          Array.from({ length: 200 }, (_, i) => send(proj, validMessage({ subject: `c${i}` }))),
        );
        const accepted = results.filter((r) => r.status === 202);
        const refused = results.filter((r) => r.status !== 202);
        assert.equal(accepted.length, 100);
        assert.equal(refused.length, 100);
        for (const r of refused) {
          if (planName === 'cap100m') assert402(r, 'monthly_quota_exceeded');
          else assertErrorEnvelope(r, 429, 'rate_limit_error', 'daily_send_cap_exceeded');
        }
        assert.equal(new Set(accepted.map((r) => r.body.id)).size, 100);
        const usage = (await showProject(p.ctx, proj.project.id)).usage;
        assert.equal(usage.month.messages, 100);
        assert.equal(usage.day.messages, 100);
        assert.equal(await messageCount(p, proj.project.id), 100);
        assert.equal(
          (await storedMimeCount(p)) - filesBefore,
          100,
          'refused sends leave no spool file',
        );
      });
    }
  });
});

describe('throughput_quota_exceeded (monthly bytes)', () => {
  const at = '2026-06-10T10:00:00Z';
  const message = validMessage({ subject: 'sized', text: 'x'.repeat(2000) });
  let size = 0;
  let p: TestPostern;

  before(async () => {
    // Measure the stored MIME size of the message on a first server, then size the plans by it.
    const probe = await startTestPostern({ clock: new ManualClock(Date.parse(at)) });
    try {
      const proj = await createProjectWithKeys(probe.ctx, 'probe');
      const sizes: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await post(probe.production, '/v1/send', { key: proj.liveKey, json: message });
        assert.equal(res.status, 202, res.text);
        sizes.push(await sizeOf(probe, res.body.id));
      }
      assert.equal(new Set(sizes).size, 1, `identical messages have one size: ${sizes}`);
      size = sizes[0];
      assert.ok(size > 2000);
    } finally {
      await probe.close();
    }
    p = await startTestPostern({
      clock: new ManualClock(Date.parse(at)),
      config: {
        ...withPlans({
          exact3: plan({ monthly_messages: 1000, monthly_bytes: 3 * size }),
          three_and_half: plan({
            monthly_messages: 1000,
            monthly_bytes: 3 * size + Math.floor(size / 2),
          }),
          grace50: plan({
            monthly_messages: 1000,
            monthly_bytes: 3 * size + Math.floor(size / 2),
            bytes_grace_percent: 50,
          }),
          paid_bytes: plan({ monthly_messages: 1, overage: true, monthly_bytes: 2 * size }),
        }),
      },
    });
  });
  after(async () => p?.close());

  const sendN = async (proj: ProjectWithKeys, n: number) => {
    for (let i = 0; i < n; i++) {
      const res = await post(p.production, '/v1/send', { key: proj.liveKey, json: message });
      assertAccepted(res);
      assert.equal(await sizeOf(p, res.body.id), size);
    }
  };
  const sendOne = (proj: ProjectWithKeys) =>
    post(p.production, '/v1/send', { key: proj.liveKey, json: message });

  test('a cap of exactly 3 messages’ bytes accepts the 3rd (fits exactly) and refuses the 4th', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'exact3', 'exact3');
    await sendN(proj, 3);
    const files = await storedMimeCount(p);
    assert402(await sendOne(proj), 'throughput_quota_exceeded');
    assert.equal(await storedMimeCount(p), files, 'the refused message leaves no spool file');
    const usage = (await showProject(p.ctx, proj.project.id)).usage;
    assert.deepEqual([usage.month.messages, usage.month.bytes], [3, 3 * size]);
    assert.equal(await messageCount(p, proj.project.id), 3);
  });

  test('a cap a little above 3 messages accepts 3 and refuses the 4th; a smaller message still fits', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'three and a half', 'three_and_half');
    await sendN(proj, 3);
    assert402(await sendOne(proj), 'throughput_quota_exceeded');
    const small = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: validMessage({ subject: 's', text: 'x' }),
    });
    assertAccepted(small);
    const smallSize = await sizeOf(p, small.body.id);
    assert.ok(
      smallSize <= Math.floor(size / 2),
      `small message ${smallSize} bytes fits in the remaining ${Math.floor(size / 2)}`,
    );
    assert.equal(
      (await showProject(p.ctx, proj.project.id)).usage.month.bytes,
      3 * size + smallSize,
    );
  });

  test('the grace percent widens the cap (3.5 messages + 50% → 5 messages)', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'grace', 'grace50');
    await sendN(proj, 5);
    assert402(await sendOne(proj), 'throughput_quota_exceeded');
    assert.equal(await messageCount(p, proj.project.id), 5);
  });

  test('overage does not lift the data-volume cap', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'paid bytes', 'paid_bytes');
    await sendN(proj, 2);
    assert402(await sendOne(proj), 'throughput_quota_exceeded');
    assert.equal((await showProject(p.ctx, proj.project.id)).usage.month.overage_messages, 1);
  });

  test('the sandbox is not metered by bytes', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'bytes sandbox', 'exact3');
    await sendN(proj, 3);
    for (let i = 0; i < 3; i++)
      assertAccepted(
        await post(p.sandbox, '/v1/send', { key: proj.testKey, json: message }),
        'captured',
      );
    assert.equal((await showProject(p.ctx, proj.project.id)).usage.month.bytes, 3 * size);
  });
});
