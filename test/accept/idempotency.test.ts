import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { getValue, type SqlParam } from '../../src/store/queries.js';
import { serverWithProject } from '../support/hooks.js';
import {
  createProjectWithKeys,
  type HttpResult,
  type ProjectWithKeys,
  post,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeCountIn } from '../support/storeReads.js';

let seq = 0;
/** A fresh, valid Idempotency-Key per call (so tests never share one by accident). */
function freshKey(label = 'k'): string {
  seq += 1;
  return `${label}-${process.pid}-${seq}-${Date.now().toString(36)}`.slice(0, 40).padEnd(12, 'x');
}

function assertIdemError(res: HttpResult, code: string): void {
  assert.equal(res.status, 422, res.text);
  assert.deepEqual(res.body, {
    error: { type: 'validation_error', code, message: res.body.error.message },
  });
  assert.equal(typeof res.body.error.message, 'string');
}

describe('Idempotency-Key on POST /v1/send', () => {
  let p: TestPostern;
  let proj: ProjectWithKeys;

  serverWithProject('idempotency', (server, project) => {
    p = server;
    proj = project;
  });

  const countWhere = async (sqlText: string, ...args: SqlParam[]) =>
    (await getValue<number>(p.ctx.store, sqlText, ...args))!;
  const messagesWithKey = (projectId: string, key: string) =>
    countWhere(
      'SELECT COUNT(*) FROM messages WHERE project_id = ? AND idempotency_key = ?',
      projectId,
      key,
    );
  const totals = async () => ({
    messages: await countWhere('SELECT COUNT(*) FROM messages'),
    events: await countWhere('SELECT COUNT(*) FROM events'),
    idempotency_keys: await countWhere('SELECT COUNT(*) FROM idempotency_keys'),
    stored_mime: await storedMimeCountIn(p.ctx.store, p.stateDir),
  });
  const send = (key: string, json: unknown, opts: { base?: string; apiKey?: string } = {}) =>
    post(opts.base ?? p.production, '/v1/send', {
      key: opts.apiKey ?? proj.liveKey,
      json,
      headers: { 'idempotency-key': key },
    });

  describe('header format', () => {
    test('11 characters is idempotency_key:invalid_length', async () => {
      assertIdemError(await send('a'.repeat(11), validMessage()), 'idempotency_key:invalid_length');
    });

    test('41 characters is idempotency_key:invalid_length', async () => {
      assertIdemError(await send('a'.repeat(41), validMessage()), 'idempotency_key:invalid_length');
    });

    test('an empty header value is idempotency_key:invalid_length', async () => {
      assertIdemError(await send('', validMessage()), 'idempotency_key:invalid_length');
    });

    test('characters outside [A-Za-z0-9_-] are idempotency_key:invalid', async () => {
      assertIdemError(await send('bad key!!!!!!', validMessage()), 'idempotency_key:invalid');
      assertIdemError(await send('order.12345678', validMessage()), 'idempotency_key:invalid');
      assertIdemError(await send('order/12345678', validMessage()), 'idempotency_key:invalid');
      assertIdemError(await send('order:12345678', validMessage()), 'idempotency_key:invalid');
    });

    test('12 and 40 characters of A-Z, a-z, 0-9, _ and - are accepted', async () => {
      for (const key of ['Ab0_-Ab0_-Ab', 'aZ9_-'.repeat(8), `${'_'.repeat(6)}${'-'.repeat(6)}`]) {
        const res = await send(key, validMessage());
        assert.equal(res.status, 202, `${key}: ${res.text}`);
        assert.equal(await messagesWithKey(proj.project.id, key), 1);
      }
    });

    test('a malformed key is refused before the body is read and stores nothing', async () => {
      const before = await totals();
      assertIdemError(await send('short', validMessage()), 'idempotency_key:invalid_length');
      assertIdemError(
        await post(p.production, '/v1/send', {
          key: proj.liveKey,
          raw: '{not json',
          headers: { 'idempotency-key': 'bad key!!!!!!' },
        }),
        'idempotency_key:invalid',
      );
      assertIdemError(
        await send('bad key!!!!!!', validMessage({ subject: undefined })),
        'idempotency_key:invalid',
      );
      assert.deepEqual(await totals(), before);
    });

    test('the key check applies on the sandbox too', async () => {
      assertIdemError(
        await send('a'.repeat(41), validMessage(), { base: p.sandbox, apiKey: proj.testKey }),
        'idempotency_key:invalid_length',
      );
      assertIdemError(
        await send('bad key!!!!!!', validMessage(), { base: p.sandbox, apiKey: proj.testKey }),
        'idempotency_key:invalid',
      );
    });
  });

  describe('repeats', () => {
    test('a repeat returns the identical 202 body and creates no second row, event or file', async () => {
      const key = freshKey('repeat');
      const first = await send(key, validMessage({ category: 'welcome' }));
      assert.equal(first.status, 202);
      const before = await totals();
      const second = await send(key, validMessage({ category: 'welcome' }));
      const third = await send(key, validMessage({ category: 'welcome' }));
      assert.equal(second.status, 202);
      assert.equal(third.status, 202);
      assert.deepEqual(second.body, first.body);
      assert.deepEqual(third.body, first.body);
      assert.equal(second.text, first.text);
      assert.deepEqual(await totals(), before);
      assert.equal(await messagesWithKey(proj.project.id, key), 1);
    });

    test('a repeat with a different body returns the first body and keeps the first message', async () => {
      const key = freshKey('differ');
      const first = await send(
        key,
        validMessage({ subject: 'First', category: 'one', paused: true }),
      );
      assert.equal(first.status, 202);
      assert.equal(first.body.status, 'paused');
      const before = await totals();
      const second = await send(
        key,
        validMessage({ subject: 'Second', category: 'two', routing: { strategy: 'random' } }),
      );
      assert.equal(second.status, 202);
      assert.deepEqual(second.body, first.body);
      assert.deepEqual(await totals(), before);
      const row = await p.ctx.store.get(
        'SELECT subject, category, status FROM messages WHERE id = ?',
        first.body.id,
      );
      assert.deepEqual(row, { subject: 'First', category: 'one', status: 'paused' });
    });

    test('a repeat with an invalid body still returns the original 202', async () => {
      const key = freshKey('invalid');
      const first = await send(key, validMessage());
      assert.equal(first.status, 202);
      const before = await totals();
      const { subject: _subject, ...noSubject } = validMessage();
      const invalidBodies: HttpResult[] = [
        await send(key, noSubject),
        await send(key, { ...validMessage(), unknown_field: 1 }),
        await send(key, []),
        await post(p.production, '/v1/send', {
          key: proj.liveKey,
          raw: '{not json',
          headers: { 'idempotency-key': key },
        }),
        await post(p.production, '/v1/send', {
          key: proj.liveKey,
          raw: '',
          headers: { 'idempotency-key': key },
        }),
      ];
      for (const res of invalidBodies) {
        assert.equal(res.status, 202, res.text);
        assert.deepEqual(res.body, first.body);
      }
      assert.deepEqual(await totals(), before);
    });

    test('the same key in two projects creates two messages', async () => {
      const other = await createProjectWithKeys(p.ctx, 'other project');
      const key = freshKey('two-projects');
      const a = await send(key, validMessage());
      const b = await send(key, validMessage(), { apiKey: other.liveKey });
      assert.equal(a.status, 202);
      assert.equal(b.status, 202);
      assert.notEqual(a.body.id, b.body.id);
      assert.equal(a.body.project_id, proj.project.id);
      assert.equal(b.body.project_id, other.project.id);
      assert.equal(await messagesWithKey(proj.project.id, key), 1);
      assert.equal(await messagesWithKey(other.project.id, key), 1);
      // Each project's repeat returns its own message.
      assert.deepEqual((await send(key, validMessage())).body, a.body);
      assert.deepEqual((await send(key, validMessage(), { apiKey: other.liveKey })).body, b.body);
    });

    test('keys are scoped per environment: a sandbox rehearsal never answers for the production send', async () => {
      const key = freshKey('promotion');
      const rehearsal = await send(key, validMessage(), { base: p.sandbox, apiKey: proj.testKey });
      const real = await send(key, validMessage());
      assert.equal(rehearsal.status, 202);
      assert.equal(rehearsal.body.status, 'captured');
      assert.equal(real.status, 202);
      assert.equal(real.body.status, 'queued');
      assert.notEqual(real.body.id, rehearsal.body.id);
      assert.equal(await messagesWithKey(proj.project.id, key), 2);
      assert.deepEqual(
        (await send(key, validMessage(), { base: p.sandbox, apiKey: proj.testKey })).body,
        rehearsal.body,
      );
      assert.deepEqual((await send(key, validMessage())).body, real.body);
    });

    test('a key first used on a request that failed validation can be used afterwards', async () => {
      const key = freshKey('after-422');
      const { subject: _subject, ...noSubject } = validMessage();
      const failed = await send(key, noSubject);
      assert.equal(failed.status, 422);
      assert.equal(failed.body.error.code, 'subject:required');
      const unparseable = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        raw: '{',
        headers: { 'idempotency-key': key },
      });
      assert.equal(unparseable.status, 400);
      assert.equal(await messagesWithKey(proj.project.id, key), 0);

      const ok = await send(key, validMessage({ subject: 'Now valid' }));
      assert.equal(ok.status, 202, ok.text);
      assert.equal(await messagesWithKey(proj.project.id, key), 1);
      const repeat = await send(key, noSubject);
      assert.equal(repeat.status, 202);
      assert.deepEqual(repeat.body, ok.body);
    });

    test('a key first used on a request refused with 401 can be used afterwards', async () => {
      const key = freshKey('after-401');
      const refused = await send(key, validMessage(), { apiKey: proj.testKey });
      assert.equal(refused.status, 401);
      const ok = await send(key, validMessage());
      assert.equal(ok.status, 202);
      assert.equal(await messagesWithKey(proj.project.id, key), 1);
    });
  });

  describe('concurrency', () => {
    test('20 concurrent requests with one key all get the same 202 and create one message', async () => {
      const key = freshKey('concurrent');
      const before = await totals();
      const results = await Promise.all(
        Array.from({ length: 20 }, () => send(key, validMessage())),
      );
      for (const res of results) {
        assert.equal(res.status, 202, res.text);
        assert.deepEqual(res.body, results[0].body);
      }
      assert.equal(await messagesWithKey(proj.project.id, key), 1);
      assert.deepEqual(await totals(), {
        messages: before.messages + 1,
        events: before.events + 1,
        idempotency_keys: before.idempotency_keys + 1,
        stored_mime: before.stored_mime + 1,
      });
    });

    test('20 concurrent requests with one key and different bodies all get the same 202 and create one message', async () => {
      const key = freshKey('concurrent-diff');
      const before = await totals();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          send(
            key,
            validMessage({ subject: `Subject ${i}`, category: `cat-${i}`, paused: i % 2 === 0 }),
          ),
        ),
      );
      for (const res of results) {
        assert.equal(res.status, 202, res.text);
        assert.deepEqual(res.body, results[0].body);
      }
      assert.equal(await messagesWithKey(proj.project.id, key), 1);
      const row = (await p.ctx.store.get<{ subject: string; category: string; status: string }>(
        'SELECT subject, category, status FROM messages WHERE id = ?',
        results[0].body.id,
      ))!;
      // The stored message is one of the requests, and the 202 describes that one.
      const i = Number(row.subject.replace('Subject ', ''));
      assert.equal(row.category, `cat-${i}`);
      assert.equal(results[0].body.category, `cat-${i}`);
      assert.equal(row.status, results[0].body.status);
      assert.equal(results[0].body.status, i % 2 === 0 ? 'paused' : 'queued');
      assert.deepEqual(await totals(), {
        messages: before.messages + 1,
        events: before.events + 1,
        idempotency_keys: before.idempotency_keys + 1,
        stored_mime: before.stored_mime + 1,
      });
    });

    test('concurrent requests with one key where some bodies are invalid create one message, and every 202 is the same', async () => {
      const key = freshKey('concurrent-mixed');
      const { subject: _subject, ...noSubject } = validMessage();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          send(key, i % 2 === 0 ? noSubject : validMessage({ subject: `ok ${i}` })),
        ),
      );
      const accepted = results.filter((r) => r.status === 202);
      assert.ok(accepted.length >= 10, 'every valid request is answered 202');
      for (const res of results) {
        if (res.status === 202) assert.deepEqual(res.body, accepted[0].body);
        else assert.equal(res.body.error.code, 'subject:required');
      }
      assert.equal(await messagesWithKey(proj.project.id, key), 1);
    });

    test('concurrent requests with distinct keys create one message each', async () => {
      const keys = Array.from({ length: 10 }, () => freshKey('distinct'));
      const results = await Promise.all(keys.map((k) => send(k, validMessage())));
      assert.equal(new Set(results.map((r) => r.body.id)).size, 10);
      for (const k of keys) assert.equal(await messagesWithKey(proj.project.id, k), 1);
    });
  });

  describe('batch ignores Idempotency-Key', () => {
    test('two identical batches with the same header give different ids', async () => {
      const key = freshKey('batch');
      const body = { messages: [validMessage(), validMessage({ subject: 'Two' })] };
      const before = await totals();
      const a = await post(p.production, '/v1/send/batch', {
        key: proj.liveKey,
        json: body,
        headers: { 'idempotency-key': key },
      });
      const b = await post(p.production, '/v1/send/batch', {
        key: proj.liveKey,
        json: body,
        headers: { 'idempotency-key': key },
      });
      assert.equal(a.status, 207);
      assert.equal(b.status, 207);
      const ids = [...a.body.data, ...b.body.data].map((s: { id: string }) => s.id);
      assert.equal(new Set(ids).size, 4);
      assert.equal((await totals()).messages, before.messages + 4);
      assert.equal((await totals()).idempotency_keys, before.idempotency_keys);
      // The key was not recorded by the batch: a single send with it is a new message.
      const single = await send(key, validMessage());
      assert.equal(single.status, 202);
      assert.ok(!ids.includes(single.body.id));
    });

    test("a single send's key does not make a batch with that header return the single send", async () => {
      const key = freshKey('single-then-batch');
      const single = await send(key, validMessage());
      const batch = await post(p.production, '/v1/send/batch', {
        key: proj.liveKey,
        json: { messages: [validMessage()] },
        headers: { 'idempotency-key': key },
      });
      assert.equal(batch.status, 207);
      assert.equal(batch.body.data.length, 1);
      assert.notEqual(batch.body.data[0].id, single.body.id);
    });

    test('a malformed Idempotency-Key on a batch is ignored', async () => {
      for (const key of ['bad key!!!!!!', 'short', 'a'.repeat(41), '']) {
        const res = await post(p.production, '/v1/send/batch', {
          key: proj.liveKey,
          json: { messages: [validMessage()] },
          headers: { 'idempotency-key': key },
        });
        assert.equal(res.status, 207, `${JSON.stringify(key)}: ${res.text}`);
        assert.equal(res.body.data.length, 1);
        assert.deepEqual(Object.keys(res.body.data[0]).sort(), ['id', 'status']);
        assert.equal(res.body.data[0].status, 'queued');
      }
    });
  });
});
