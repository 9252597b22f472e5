import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { getValue } from '../../src/store/queries.js';
import { serverWithProject } from '../support/hooks.js';
import {
  type HttpResult,
  type ProjectWithKeys,
  post,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeOf } from '../support/storedMime.js';
import { storedMimeCountIn } from '../support/storeReads.js';

const ID = /^m\.[0-9a-z]{26}$/;
const HOUR = 3600_000;

interface Detail {
  field: string;
  code: string;
}

/** The exact validation envelope for `details`, taking the human message from `actual`. */
function validationEnvelope(actual: any, details: Detail[]) {
  assert.equal(
    typeof actual?.error?.message,
    'string',
    `an error envelope: ${JSON.stringify(actual)}`,
  );
  return {
    error: {
      type: 'validation_error',
      code: details[0].code,
      message: actual.error.message,
      details,
    },
  };
}

function assertWholeRequest422(res: HttpResult, details: Detail[]): void {
  assert.equal(res.status, 422, res.text);
  assert.deepEqual(res.body, validationEnvelope(res.body, details));
}

function assert401(res: HttpResult, code: string): void {
  assert.equal(res.status, 401, res.text);
  assert.deepEqual(res.body, {
    error: { type: 'authentication_error', code, message: res.body.error.message },
  });
}

describe('POST /v1/send/batch', () => {
  let p: TestPostern;
  let proj: ProjectWithKeys;

  serverWithProject('batch project', (server, project) => {
    p = server;
    proj = project;
  });

  const batch = (messages: unknown, opts: { base?: string; key?: string } = {}) =>
    post(opts.base ?? p.production, '/v1/send/batch', {
      key: opts.key ?? proj.liveKey,
      json: { messages },
    });
  const row = (id: string) =>
    p.ctx.store.get<{
      id: string;
      project_id: string;
      environment: string;
      status: string;
      subject: string;
      spool_path: string;
    }>(
      'SELECT id, project_id, environment, status, subject, spool_path FROM messages WHERE id = ?',
      id,
    );
  const totals = async () => ({
    messages: (await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages'))!,
    events: (await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM events'))!,
    stored_mime: await storedMimeCountIn(p.ctx.store, p.stateDir),
  });

  /** A BatchAccepted slot: exactly {id, status}, backed by a row, a MIME file and a mail.accepted event. */
  async function assertAcceptedSlot(slot: any, status: string, subject: string): Promise<void> {
    assert.deepEqual(Object.keys(slot).sort(), ['id', 'status'], `slot ${JSON.stringify(slot)}`);
    assert.match(slot.id, ID);
    assert.deepEqual(slot, { id: slot.id, status });
    const r = await row(slot.id);
    assert.ok(r, `a messages row for ${slot.id}`);
    assert.equal(r.status, status);
    assert.equal(r.subject, subject, 'data[i] answers messages[i]');
    assert.equal(r.project_id, proj.project.id);
    assert.ok(
      (await storedMimeOf(p.ctx.store, p.stateDir, slot.id))
        .toString('utf8')
        .includes(`Message-ID: <${slot.id}@example.com>`),
    );
    const events = await p.ctx.store.all<{ data: string }>(
      "SELECT data FROM events WHERE message_id = ? AND type = 'mail.accepted'",
      slot.id,
    );
    assert.equal(events.length, 1);
    assert.equal(JSON.parse(events[0].data).mail.uid, slot.id);
  }

  test('answers 207 with data[i] for messages[i], mixing accepted slots and full error envelopes', async () => {
    const { subject: _s, ...noSubject } = validMessage();
    const messages = [
      validMessage({ subject: 'first' }),
      noSubject,
      validMessage({ subject: 'third' }),
      validMessage({ subject: 'fourth', to: 'not-an-address' }),
      { from: 'bad', to: [], subject: 'fifth' },
      validMessage({ subject: 'sixth', paused: true }),
      validMessage({ subject: 'seventh', unexpected: 1 }),
      validMessage({ subject: 'eighth', scheduled_at: new Date(Date.now() + HOUR).toISOString() }),
      validMessage({ subject: 'ninth', scheduled_at: new Date(Date.now() - HOUR).toISOString() }),
    ];
    const before = await totals();
    const res = await batch(messages);
    assert.equal(res.status, 207, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(Object.keys(res.body), ['data']);
    const data = res.body.data as any[];
    assert.equal(data.length, messages.length);

    await assertAcceptedSlot(data[0], 'queued', 'first');
    assert.deepEqual(
      data[1],
      validationEnvelope(data[1], [{ field: 'subject', code: 'subject:required' }]),
    );
    await assertAcceptedSlot(data[2], 'queued', 'third');
    assert.deepEqual(
      data[3],
      validationEnvelope(data[3], [{ field: 'to', code: 'to:invalid_address' }]),
    );
    assert.deepEqual(
      data[4],
      validationEnvelope(data[4], [
        { field: 'from', code: 'from:invalid_address' },
        { field: 'to', code: 'to:too_few' },
        { field: 'body', code: 'body:required' },
      ]),
    );
    await assertAcceptedSlot(data[5], 'paused', 'sixth');
    assert.deepEqual(
      data[6],
      validationEnvelope(data[6], [{ field: 'unexpected', code: 'body:unknown_key' }]),
    );
    await assertAcceptedSlot(data[7], 'scheduled', 'eighth');
    assert.deepEqual(
      data[8],
      validationEnvelope(data[8], [{ field: 'scheduled_at', code: 'scheduled_at:too_soon' }]),
    );

    const ids = [data[0], data[2], data[5], data[7]].map((s) => s.id);
    assert.equal(new Set(ids).size, 4);
    const now = await totals();
    assert.equal(now.messages, before.messages + 4, 'only the valid elements are stored');
    assert.equal(now.events, before.events + 4);
    assert.equal(now.stored_mime, before.stored_mime + 4);
  });

  test('elements are independent: the same valid element is accepted whatever its neighbours are', async () => {
    const { subject: _s, ...noSubject } = validMessage();
    const alone = await batch([validMessage({ subject: 'alone' })]);
    const surrounded = await batch([
      noSubject,
      validMessage({ subject: 'surrounded' }),
      'not an object',
      { ...validMessage(), html: 5 },
    ]);
    assert.equal(alone.status, 207);
    assert.equal(surrounded.status, 207);
    await assertAcceptedSlot(alone.body.data[0], 'queued', 'alone');
    assert.equal(surrounded.body.data.length, 4);
    assert.deepEqual(
      surrounded.body.data[0],
      validationEnvelope(surrounded.body.data[0], [{ field: 'subject', code: 'subject:required' }]),
    );
    await assertAcceptedSlot(surrounded.body.data[1], 'queued', 'surrounded');
    assert.deepEqual(
      surrounded.body.data[2],
      validationEnvelope(surrounded.body.data[2], [{ field: 'body', code: 'body:invalid_type' }]),
    );
    assert.deepEqual(
      surrounded.body.data[3],
      validationEnvelope(surrounded.body.data[3], [{ field: 'html', code: 'html:invalid_type' }]),
    );
  });

  test('an element whose custom headers make a header block over 1 MiB gets its own 422 headers:too_large; its neighbour is accepted', async () => {
    const before = await totals();
    const headers = Object.fromEntries(
      Array.from({ length: 150 }, (_, i) => [`X-Pad-${i}`, 'v'.repeat(8000)]),
    );
    const res = await batch([
      validMessage({ subject: 'huge headers', headers }),
      validMessage({ subject: 'neighbour' }),
    ]);
    assert.equal(res.status, 207, res.text);
    assert.deepEqual(
      res.body.data[0],
      validationEnvelope(res.body.data[0], [{ field: 'headers', code: 'headers:too_large' }]),
    );
    await assertAcceptedSlot(res.body.data[1], 'queued', 'neighbour');
    assert.deepEqual(await totals(), {
      messages: before.messages + 1,
      events: before.events + 1,
      stored_mime: before.stored_mime + 1,
    });
  });

  test('a batch where every element fails is still a 207 and stores nothing', async () => {
    const before = await totals();
    const res = await batch([{}, 7]);
    assert.equal(res.status, 207, res.text);
    assert.equal(res.body.data.length, 2);
    assert.equal(res.body.data[0].error.type, 'validation_error');
    assert.ok(Array.isArray(res.body.data[0].error.details));
    assert.deepEqual(
      res.body.data[1],
      validationEnvelope(res.body.data[1], [{ field: 'body', code: 'body:invalid_type' }]),
    );
    assert.deepEqual(await totals(), before);
  });

  test('a non-object element gets its own body:invalid_type envelope with details', async () => {
    const elements: unknown[] = ['a string', 42, null, [], [validMessage()], true];
    const res = await batch([validMessage({ subject: 'kept' }), ...elements]);
    assert.equal(res.status, 207, res.text);
    assert.equal(res.body.data.length, elements.length + 1);
    await assertAcceptedSlot(res.body.data[0], 'queued', 'kept');
    for (let i = 1; i <= elements.length; i++) {
      const slot = res.body.data[i];
      assert.deepEqual(
        slot,
        validationEnvelope(slot, [{ field: 'body', code: 'body:invalid_type' }]),
        `slot ${i} for ${JSON.stringify(elements[i - 1])}`,
      );
    }
  });

  test('100 elements are accepted, each with its own id and row, in order', async () => {
    const messages = Array.from({ length: 100 }, (_, i) => validMessage({ subject: `bulk ${i}` }));
    const before = await totals();
    const res = await batch(messages);
    assert.equal(res.status, 207, res.text);
    const data = res.body.data as { id: string; status: string }[];
    assert.equal(data.length, 100);
    assert.equal(new Set(data.map((s) => s.id)).size, 100);
    for (const [i, slot] of data.entries()) {
      assert.deepEqual(slot, { id: slot.id, status: 'queued' });
      assert.match(slot.id, ID);
      assert.equal((await row(slot.id))?.subject, `bulk ${i}`, `data[${i}] answers messages[${i}]`);
    }
    const now = await totals();
    assert.equal(now.messages, before.messages + 100);
    assert.equal(now.events, before.events + 100);
    assert.equal(now.stored_mime, before.stored_mime + 100);
  });

  test('101 elements are a whole-request 422 messages:too_many and store nothing', async () => {
    const before = await totals();
    const res = await batch(Array.from({ length: 101 }, () => validMessage()));
    assertWholeRequest422(res, [{ field: 'messages', code: 'messages:too_many' }]);
    assert.deepEqual(await totals(), before);
  });

  test('0 elements are a whole-request 422 messages:too_few', async () => {
    assertWholeRequest422(await batch([]), [{ field: 'messages', code: 'messages:too_few' }]);
  });

  test('a missing messages key is a whole-request 422 messages:required', async () => {
    assertWholeRequest422(
      await post(p.production, '/v1/send/batch', { key: proj.liveKey, json: {} }),
      [{ field: 'messages', code: 'messages:required' }],
    );
  });

  test('messages that is not an array is a whole-request 422 messages:invalid_type', async () => {
    const before = await totals();
    for (const messages of ['x', 1, {}, validMessage(), null, true]) {
      assertWholeRequest422(await batch(messages), [
        { field: 'messages', code: 'messages:invalid_type' },
      ]);
    }
    assert.deepEqual(await totals(), before);
  });

  test('an extra top-level key is a whole-request 422 body:unknown_key, even with valid messages', async () => {
    const before = await totals();
    const res = await post(p.production, '/v1/send/batch', {
      key: proj.liveKey,
      json: { messages: [validMessage()], extra: true },
    });
    assertWholeRequest422(res, [{ field: 'extra', code: 'body:unknown_key' }]);
    assert.deepEqual(await totals(), before);
  });

  test('envelope errors are listed messages first, then unknown keys', async () => {
    const res = await post(p.production, '/v1/send/batch', {
      key: proj.liveKey,
      json: { zeta: 1, messages: [], alpha: 2 },
    });
    assertWholeRequest422(res, [
      { field: 'messages', code: 'messages:too_few' },
      { field: 'alpha', code: 'body:unknown_key' },
      { field: 'zeta', code: 'body:unknown_key' },
    ]);
  });

  test('a single Message as the batch body is a whole-request 422 (messages:required first)', async () => {
    const res = await post(p.production, '/v1/send/batch', {
      key: proj.liveKey,
      json: validMessage(),
    });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'messages:required');
    assert.deepEqual(res.body.error.details[0], { field: 'messages', code: 'messages:required' });
    // from/to/subject/text are unknown keys of the batch envelope, so they come last.
    const rest = [...(res.body.error.details as Detail[]).slice(1)].sort((a, b) =>
      a.field.localeCompare(b.field),
    );
    assert.deepEqual(
      rest,
      ['from', 'subject', 'text', 'to'].map((field) => ({ field, code: 'body:unknown_key' })),
    );
  });

  test('a non-object batch body is a whole-request 422 body:invalid_type', async () => {
    for (const json of [[validMessage()], 'text', 3, null]) {
      assertWholeRequest422(
        await post(p.production, '/v1/send/batch', { key: proj.liveKey, json }),
        [{ field: 'body', code: 'body:invalid_type' }],
      );
    }
  });

  test('an unparseable batch body is a 400 body:invalid_json without details', async () => {
    const res = await post(p.production, '/v1/send/batch', {
      key: proj.liveKey,
      raw: '{"messages": [',
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, {
      error: {
        type: 'validation_error',
        code: 'body:invalid_json',
        message: res.body.error.message,
      },
    });
  });

  test('a sandbox batch captures every valid element', async () => {
    const res = await batch(
      [
        validMessage({ subject: 'sb 0' }),
        validMessage({ subject: 'sb 1', paused: true }),
        validMessage({ subject: 'sb 2', scheduled_at: new Date(Date.now() + HOUR).toISOString() }),
        'bad',
      ],
      { base: p.sandbox, key: proj.testKey },
    );
    assert.equal(res.status, 207, res.text);
    assert.equal(res.body.data.length, 4);
    await assertAcceptedSlot(res.body.data[0], 'captured', 'sb 0');
    await assertAcceptedSlot(res.body.data[1], 'captured', 'sb 1');
    await assertAcceptedSlot(res.body.data[2], 'captured', 'sb 2');
    assert.deepEqual(
      res.body.data[3],
      validationEnvelope(res.body.data[3], [{ field: 'body', code: 'body:invalid_type' }]),
    );
    for (const slot of res.body.data.slice(0, 3))
      assert.equal((await row(slot.id))?.environment, 'sandbox');
  });

  test('whole-request 401s: no key, a malformed key, and either mode mismatch; nothing is stored', async () => {
    const before = await totals();
    const body = { messages: [validMessage(), validMessage()] };
    assert401(await post(p.production, '/v1/send/batch', { json: body }), 'missing_api_key');
    assert401(await post(p.sandbox, '/v1/send/batch', { json: body }), 'missing_api_key');
    assert401(
      await post(p.production, '/v1/send/batch', {
        json: body,
        headers: { authorization: 'Bearer ps_live_short' },
      }),
      'missing_api_key',
    );
    assert401(
      await post(p.production, '/v1/send/batch', { key: proj.testKey, json: body }),
      'mode_mismatch',
    );
    assert401(
      await post(p.sandbox, '/v1/send/batch', { key: proj.liveKey, json: body }),
      'mode_mismatch',
    );
    // Authentication comes before the envelope: a bad key with a bad envelope is still a 401.
    assert401(
      await post(p.production, '/v1/send/batch', { json: { messages: [] } }),
      'missing_api_key',
    );
    assert401(
      await post(p.sandbox, '/v1/send/batch', { key: proj.liveKey, json: { messages: 'x' } }),
      'mode_mismatch',
    );
    assert.deepEqual(await totals(), before);
  });
});
