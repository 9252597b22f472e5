import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { showProject } from '../../src/operator/projects.js';
import { getValue } from '../../src/store/queries.js';
import { assertErrorEnvelope } from '../support/assertions.js';
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
import { storedMimeOf } from '../support/storedMime.js';
import { storedMimeCountIn } from '../support/storeReads.js';

const ID = /^m\.[0-9a-z]{26}$/;

function emlFiles(stateDir: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else out.push(full);
    }
  };
  walk(path.join(stateDir, 'spool'));
  return out;
}

/**
 * A persistence fault: inserting a message whose subject is 'FAIL' fails, on either backend (a
 * trigger on the suite's own connection); resolves with its removal.
 */
async function failInserts(p: TestPostern, name: string): Promise<() => Promise<void>> {
  const q = p.ctx.store;
  if (q.dialect === 'postgres') {
    await q.run(
      `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.subject = 'FAIL' THEN RAISE EXCEPTION 'injected fault'; END IF; RETURN NEW; END $$`,
    );
    await q.run(
      `CREATE TRIGGER ${name} BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION ${name}()`,
    );
    return async () => {
      await q.run(`DROP TRIGGER IF EXISTS ${name} ON messages`);
      await q.run(`DROP FUNCTION IF EXISTS ${name}()`);
    };
  }
  await q.run(
    `CREATE TRIGGER ${name} BEFORE INSERT ON messages WHEN NEW.subject = 'FAIL' BEGIN SELECT RAISE(ABORT, 'injected fault'); END`,
  );
  return async () => {
    await q.run(`DROP TRIGGER IF EXISTS ${name}`);
  };
}

describe('batch sends against plan caps', () => {
  let p: TestPostern;
  const clock = new ManualClock(Date.parse('2026-09-14T15:30:00Z'));

  before(async () => {
    p = await startTestPostern({
      clock,
      config: {
        ...withPlans({
          daily37: plan({ monthly_messages: 100_000, daily_messages: 37 }),
          monthly60: plan({ monthly_messages: 60 }),
          daily5: plan({ monthly_messages: 100_000, daily_messages: 5 }),
          paid10: plan({ monthly_messages: 10, overage: true }),
        }),
        rate_limits: {
          window_seconds: 60,
          send_per_key: 1000,
          batch_per_key: 2,
          unauthenticated_per_ip: 1000,
        },
      },
    });
  });
  after(async () => p.close());

  const batch = (proj: ProjectWithKeys, messages: unknown[]) =>
    post(p.production, '/v1/send/batch', { key: proj.liveKey, json: { messages } });
  const send = (proj: ProjectWithKeys, message = validMessage()) =>
    post(p.production, '/v1/send', { key: proj.liveKey, json: message });
  const rowsBySubject = async (projectId: string) =>
    new Map(
      (
        await p.ctx.store.all<{ id: string; subject: string; spool_path: string }>(
          'SELECT id, subject, spool_path FROM messages WHERE project_id = ?',
          projectId,
        )
      ).map((r) => [r.subject, r]),
    );
  const totals = async () => ({
    rows: (await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages'))!,
    events: (await getValue<number>(
      p.ctx.store,
      "SELECT COUNT(*) FROM events WHERE type = 'mail.accepted'",
    ))!,
    stored: await storedMimeCountIn(p.ctx.store, p.stateDir),
    tmp: emlFiles(p.stateDir).filter((f) => !f.endsWith('.eml')).length,
  });
  const hundred = (prefix: string) =>
    Array.from({ length: 100 }, (_, i) => validMessage({ subject: `${prefix} ${i}` }));

  /** Slots [0, k) accepted with rows and stored MIME; [k, n) equal to `refusal` exactly. */
  async function assertCutAt(
    res: HttpResult,
    proj: ProjectWithKeys,
    prefix: string,
    k: number,
    n: number,
    refusal: unknown,
  ): Promise<void> {
    assert.equal(res.status, 207, res.text);
    const data = res.body.data as any[];
    assert.equal(data.length, n);
    const rows = await rowsBySubject(proj.project.id);
    for (let i = 0; i < n; i++) {
      if (i < k) {
        assert.deepEqual(data[i], { id: data[i].id, status: 'queued' }, `slot ${i}`);
        assert.match(data[i].id, ID);
        const row = rows.get(`${prefix} ${i}`);
        assert.equal(row?.id, data[i].id, `slot ${i} has its row`);
        assert.ok(
          (await storedMimeOf(p.ctx.store, p.stateDir, row!.id)).length > 0,
          `slot ${i} has its MIME`,
        );
      } else {
        assert.deepEqual(data[i], refusal, `slot ${i}`);
        assert.equal(rows.has(`${prefix} ${i}`), false, `slot ${i} stored nothing`);
      }
    }
  }

  test('daily cap 37: elements 0..36 are accepted, 37..99 get the daily_send_cap_exceeded envelope a single send gets', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'daily 37', 'daily37');
    const before = await totals();
    const res = await batch(proj, hundred('d'));
    const single = await send(proj);
    assertErrorEnvelope(single, 429, 'rate_limit_error', 'daily_send_cap_exceeded');
    assert.equal(single.headers.get('retry-after'), String(8 * 3600 + 30 * 60));
    await assertCutAt(res, proj, 'd', 37, 100, single.body);
    const after = await totals();
    assert.deepEqual(after, {
      rows: before.rows + 37,
      events: before.events + 37,
      stored: before.stored + 37,
      tmp: before.tmp,
    });
    const usage = (await showProject(p.ctx, proj.project.id)).usage;
    assert.deepEqual([usage.day.messages, usage.month.messages], [37, 37]);

    // A later batch on the spent cap: every slot refused, still a 207.
    const again = await batch(proj, [
      validMessage({ subject: 'late 0' }),
      validMessage({ subject: 'late 1' }),
    ]);
    await assertCutAt(again, proj, 'late', 0, 2, single.body);
  });

  test('monthly cap 60: elements 0..59 are accepted, 60..99 get the monthly_quota_exceeded envelope a single send gets', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'monthly 60', 'monthly60');
    const before = await totals();
    const res = await batch(proj, hundred('m'));
    const single = await send(proj);
    assertErrorEnvelope(single, 402, 'quota_error', 'monthly_quota_exceeded');
    await assertCutAt(res, proj, 'm', 60, 100, single.body);
    const after = await totals();
    assert.deepEqual(after, {
      rows: before.rows + 60,
      events: before.events + 60,
      stored: before.stored + 60,
      tmp: before.tmp,
    });
    assert.equal((await showProject(p.ctx, proj.project.id)).usage.month.messages, 60);
  });

  test('a cap partly used by single sends runs out at the right element', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'partly used', 'daily37');
    for (let i = 0; i < 30; i++) assert.equal((await send(proj)).status, 202);
    const res = await batch(
      proj,
      Array.from({ length: 10 }, (_, i) => validMessage({ subject: `x ${i}` })),
    );
    const single = await send(proj);
    await assertCutAt(res, proj, 'x', 7, 10, single.body);
  });

  test('a paid plan (overage) accepts every element past its quota', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'paid batch', 'paid10');
    const res = await batch(proj, hundred('o'));
    await assertCutAt(res, proj, 'o', 100, 100, null);
    assert.equal((await showProject(p.ctx, proj.project.id)).usage.month.overage_messages, 90);
  });

  test('invalid elements do not consume the cap', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'mixed cap', 'daily5');
    const invalid = new Set([1, 3, 8]);
    const messages = Array.from({ length: 10 }, (_, i) =>
      invalid.has(i)
        ? validMessage({ subject: `v ${i}`, to: 'not-an-address' })
        : validMessage({ subject: `v ${i}` }),
    );
    const before = await totals();
    const res = await batch(proj, messages);
    assert.equal(res.status, 207, res.text);
    const data = res.body.data as any[];
    const single = await send(proj);
    assertErrorEnvelope(single, 429, 'rate_limit_error', 'daily_send_cap_exceeded');
    const rows = await rowsBySubject(proj.project.id);
    const acceptedAt = [0, 2, 4, 5, 6];
    for (let i = 0; i < 10; i++) {
      if (invalid.has(i)) {
        assert.deepEqual(data[i], {
          error: {
            type: 'validation_error',
            code: 'to:invalid_address',
            message: data[i].error?.message,
            details: [{ field: 'to', code: 'to:invalid_address' }],
          },
        });
        assert.equal(typeof data[i].error.message, 'string');
      } else if (acceptedAt.includes(i)) {
        assert.deepEqual(data[i], { id: data[i].id, status: 'queued' }, `slot ${i}`);
        assert.equal(rows.get(`v ${i}`)?.id, data[i].id);
      } else {
        assert.deepEqual(data[i], single.body, `slot ${i} is past the cap`);
        assert.equal(rows.has(`v ${i}`), false);
      }
    }
    assert.equal((await totals()).rows, before.rows + 5);
    assert.equal((await showProject(p.ctx, proj.project.id)).usage.day.messages, 5);
  });

  test('a persistence fault on one element fails only that slot with server_error, leaving no file behind', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'fault');
    const removeFault = await failInserts(p, 'fail_one');
    try {
      const messages = Array.from({ length: 20 }, (_, i) =>
        validMessage({ subject: i === 7 ? 'FAIL' : `f ${i}` }),
      );
      const before = await totals();
      const res = await batch(proj, messages);
      assert.equal(res.status, 207, res.text);
      const data = res.body.data as any[];
      assert.equal(data.length, 20);
      assert.equal(typeof data[7]?.error?.message, 'string', JSON.stringify(data[7]));
      assert.deepEqual(data[7], {
        error: { type: 'api_error', code: 'server_error', message: data[7].error.message },
      });
      const rows = await rowsBySubject(proj.project.id);
      for (let i = 0; i < 20; i++) {
        if (i === 7) continue;
        assert.deepEqual(data[i], { id: data[i].id, status: 'queued' }, `slot ${i}`);
        assert.equal(rows.get(`f ${i}`)?.id, data[i].id, `slot ${i} has its row`);
      }
      assert.equal(rows.has('FAIL'), false);
      const after = await totals();
      assert.deepEqual(after, {
        rows: before.rows + 19,
        events: before.events + 19,
        stored: before.stored + 19,
        tmp: before.tmp,
      });
      assert.equal(after.stored, after.rows, 'stored MIME count equals accepted count');
      const usage = (await showProject(p.ctx, proj.project.id)).usage;
      assert.equal(usage.month.messages, 19, 'the failed element is not counted');
    } finally {
      await removeFault();
    }
  });

  test('a persistence fault inside a cap does not use up the cap', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'fault and cap', 'daily5');
    const removeFault = await failInserts(p, 'fail_two');
    try {
      const messages = Array.from({ length: 8 }, (_, i) =>
        validMessage({ subject: i === 1 ? 'FAIL' : `g ${i}` }),
      );
      const res = await batch(proj, messages);
      assert.equal(res.status, 207, res.text);
      const data = res.body.data as any[];
      assert.equal(data[1].error.code, 'server_error');
      for (const i of [0, 2, 3, 4, 5])
        assert.deepEqual(data[i], { id: data[i].id, status: 'queued' }, `slot ${i}`);
      for (const i of [6, 7])
        assert.equal(data[i].error?.code, 'daily_send_cap_exceeded', `slot ${i}`);
    } finally {
      await removeFault();
    }
    const t = await totals();
    assert.equal(t.stored, t.rows);
  });

  test('the batch rate limit is a whole-request 429 that stores nothing', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'batch rate');
    assert.equal((await batch(proj, [validMessage()])).status, 207);
    assert.equal((await batch(proj, [validMessage()])).status, 207);
    const before = await totals();
    const res = await batch(proj, hundred('r'));
    assertErrorEnvelope(res, 429, 'rate_limit_error', 'rate_limited');
    assert.equal(res.headers.get('retry-after'), '60');
    assert.deepEqual(await totals(), before);
    clock.advance(60_000);
    assert.equal((await batch(proj, [validMessage()])).status, 207);
  });
});
