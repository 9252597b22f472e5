/**
 * Hostile and unusual JSON bodies over real HTTP (issue 17): bodies built to stall the process
 * (a million unknown keys, a 5 MB key name, deep nesting) get small, exact refusals; text that
 * is not text (bytes that are not UTF-8, lone surrogates) is refused with the field's code
 * instead of being stored changed; `__proto__` keys are kept; and large bodies share a memory
 * budget, beyond which a request waits and then gets 503 server_busy.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { getValue } from '../../src/store/queries.js';
import { assertErrorEnvelope } from '../support/assertions.js';
import {
  createProjectWithKeys,
  get,
  type HttpResult,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeOf } from '../support/storedMime.js';
import { storedMimeCountIn } from '../support/storeReads.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

type Detail = { field: string; code: string };

async function stored(p: TestPostern): Promise<{ rows: number; files: number }> {
  return {
    rows: (await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages'))!,
    files: await storedMimeCountIn(p.ctx.store, p.stateDir),
  };
}

/** The exact 422 envelope with these details (its message taken from the answer). */
function assertDetails(res: HttpResult, details: Detail[]): void {
  assert.equal(res.status, 422, res.text.slice(0, 500));
  assert.deepEqual(res.body, {
    error: {
      type: 'validation_error',
      code: details[0].code,
      message: res.body.error.message,
      details,
    },
  });
}

/** `{<valid message fields>, <extra>}` as JSON text, `extra` already JSON. */
const withRaw = (extra: string) => `${JSON.stringify(validMessage()).slice(0, -1)},${extra}}`;

describe('hostile JSON bodies are refused small and fast, never parsed whole', () => {
  let p: TestPostern;
  let key: string;
  before(async () => {
    p = await startTestPostern();
    key = (await createProjectWithKeys(p.ctx, 'bodies')).testKey;
  });
  after(async () => p.close());

  test('1,000,000 unknown top-level keys (13.9 MB) are 422 body:too_many_keys at body, in an answer of a few hundred bytes', async () => {
    const before = await stored(p);
    const keys: string[] = [];
    for (let i = 0; i < 1_000_000; i++) keys.push(`"unknown_${i}":1`);
    const res = await post(p.sandbox, '/v1/send', { key, raw: withRaw(keys.join(',')) });
    assertDetails(res, [{ field: 'body', code: 'body:too_many_keys' }]);
    assert.ok(res.text.length < 1000, `answer of ${res.text.length} bytes`);
    assert.deepEqual(await stored(p), before);
    assert.equal((await get(p.sandbox, '/healthz')).status, 200);
    assert.equal((await post(p.sandbox, '/v1/send', { key, json: validMessage() })).status, 202);
  });

  test('500 unknown keys list the first 20 of them as body:unknown_key, and the message counts the other 480', async () => {
    const extra: Record<string, number> = {};
    for (let i = 0; i < 500; i++) extra[`unknown_${String(i).padStart(3, '0')}`] = 1;
    const res = await post(p.sandbox, '/v1/send', { key, json: validMessage(extra) });
    const first = Array.from({ length: 20 }, (_, i) => ({
      field: `unknown_${String(i).padStart(3, '0')}`,
      code: 'body:unknown_key',
    }));
    assertDetails(res, first);
    assert.match(res.body.error.message, /and 480 more not listed\.$/);
  });

  test('an unknown key of 5 MB is named by its first 64 characters and "…": the answer stays small', async () => {
    const name = 'k'.repeat(5_000_000);
    const res = await post(p.sandbox, '/v1/send', { key, raw: withRaw(`"${name}":1`) });
    assertDetails(res, [{ field: `${'k'.repeat(64)}…`, code: 'body:unknown_key' }]);
    assert.ok(res.text.length < 1000, `answer of ${res.text.length} bytes`);
  });

  test('a metadata key of 100,000 characters is metadata:key_too_long, named cut', async () => {
    const res = await post(p.sandbox, '/v1/send', {
      key,
      json: validMessage({ metadata: { ['m'.repeat(100_000)]: 'v' } }),
    });
    assertDetails(res, [{ field: `metadata.${'m'.repeat(64)}…`, code: 'metadata:key_too_long' }]);
  });

  test('10 MB of nested brackets is 400 body:invalid_json ("nests deeper than 32 levels")', async () => {
    const before = await stored(p);
    const res = await post(p.sandbox, '/v1/send', {
      key,
      raw: withRaw(`"metadata":${'['.repeat(5_000_000)}${']'.repeat(5_000_000)}`),
    });
    assertErrorEnvelope(res, 400, 'validation_error', 'body:invalid_json');
    assert.match(res.body.error.message, /deeper than 32 levels/);
    assert.deepEqual(await stored(p), before);
  });

  test('an object of 2,000 metadata keys is metadata:too_many_keys at metadata; 5,000 recipients are recipients:too_many', async () => {
    const metadata = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, 'v']));
    assertDetails(await post(p.sandbox, '/v1/send', { key, json: validMessage({ metadata }) }), [
      { field: 'metadata', code: 'metadata:too_many_keys' },
    ]);
    const to = Array.from({ length: 5000 }, (_, i) => `r${i}@example.org`);
    assertDetails(await post(p.sandbox, '/v1/send', { key, json: validMessage({ to }) }), [
      { field: 'recipients', code: 'recipients:too_many' },
    ]);
  });

  test('a batch element of 5,000 unknown keys refuses the batch at that element (messages.1), storing nothing', async () => {
    const before = await stored(p);
    const keys = Array.from({ length: 5000 }, (_, i) => `"x${i}":1`).join(',');
    const res = await post(p.sandbox, '/v1/send/batch', {
      key,
      raw: `{"messages":[${JSON.stringify(validMessage())},${withRaw(keys)}]}`,
    });
    assertDetails(res, [{ field: 'messages.1', code: 'body:too_many_keys' }]);
    assert.deepEqual(await stored(p), before);
  });

  test('more than 5,000 keys and values in all is 413 body:too_large', async () => {
    // 800 objects of 7 keys: 12,000 keys and values, no single object or array past its limit.
    const objects = Array.from({ length: 800 }, () => ({
      a: 1,
      b: 2,
      c: 3,
      d: 4,
      e: 5,
      f: 6,
      g: 7,
    }));
    const res = await post(p.sandbox, '/v1/send', {
      key,
      json: validMessage({ unknown: objects }),
    });
    assertErrorEnvelope(res, 413, 'validation_error', 'body:too_large');
    assert.match(res.body.error.message, /more than 5000 JSON keys and values/);
  });
});

describe('text that is not text is refused with its field code, never stored changed', () => {
  let p: TestPostern;
  let key: string;
  before(async () => {
    p = await startTestPostern();
    key = (await createProjectWithKeys(p.ctx, 'text')).testKey;
  });
  after(async () => p.close());

  /** `json` as UTF-8 bytes, with every `@@` in it replaced by `bytes`. */
  const bytesWith = (json: string, bytes: number[]): Buffer => {
    const parts = json.split('@@');
    assert.ok(parts.length > 1);
    return Buffer.concat(
      parts.flatMap((part, i) =>
        i === 0 ? [Buffer.from(part)] : [Buffer.from(bytes), Buffer.from(part)],
      ),
    );
  };

  test('bytes that are not UTF-8 in the subject are 422 subject:invalid_value; nothing is stored', async () => {
    const before = await stored(p);
    const res = await post(p.sandbox, '/v1/send', {
      key,
      raw: bytesWith(JSON.stringify(validMessage({ subject: 'Hello @@' })), [0xff, 0xfe]),
    });
    assertDetails(res, [{ field: 'subject', code: 'subject:invalid_value' }]);
    assert.deepEqual(await stored(p), before);
  });

  test('a truncated UTF-8 sequence in a metadata value is 422 metadata:invalid_value at its key', async () => {
    const res = await post(p.sandbox, '/v1/send', {
      key,
      raw: bytesWith(JSON.stringify(validMessage({ metadata: { plan: 'gold@@' } })), [0xe2, 0x82]),
    });
    assertDetails(res, [{ field: 'metadata.plan', code: 'metadata:invalid_value' }]);
  });

  test('bad bytes in an attachment filename and a display name are refused at their place', async () => {
    const json = JSON.stringify(
      validMessage({
        to: ['ok@example.org', 'Bad @@ <b@example.org>'],
        attachments: [{ filename: 'a@@.txt', content: 'aGk=' }],
      }),
    );
    const res = await post(p.sandbox, '/v1/send', { key, raw: bytesWith(json, [0xc0]) });
    assertDetails(res, [
      { field: 'to.1', code: 'to:invalid_address' },
      { field: 'attachments.0.filename', code: 'attachments:invalid_value' },
    ]);
  });

  test('bad bytes in a body that also holds a real U+FFFD are 400 body:invalid_json ("not valid UTF-8"): which is which cannot be told', async () => {
    const res = await post(p.sandbox, '/v1/send', {
      key,
      raw: bytesWith(JSON.stringify(validMessage({ text: 'a \uFFFD b', subject: 'x @@' })), [0xff]),
    });
    assertErrorEnvelope(res, 400, 'validation_error', 'body:invalid_json');
    assert.match(res.body.error.message, /not valid UTF-8/);
  });

  test('bad bytes outside any string are 400 body:invalid_json', async () => {
    const res = await post(p.sandbox, '/v1/send', {
      key,
      raw: Buffer.concat([Buffer.from(JSON.stringify(validMessage())), Buffer.from([0xff])]),
    });
    assertErrorEnvelope(res, 400, 'validation_error', 'body:invalid_json');
  });

  test('a lone surrogate ("\\ud800") in the subject is 422 subject:invalid_value; in a header value headers:invalid_value', async () => {
    const before = await stored(p);
    const raw = JSON.stringify(
      validMessage({ subject: 'Hi @@', headers: { 'X-Trace': 'v@@' } }),
    ).replaceAll('@@', '\\ud800');
    assertDetails(await post(p.sandbox, '/v1/send', { key, raw }), [
      { field: 'subject', code: 'subject:invalid_value' },
      { field: 'headers.X-Trace', code: 'headers:invalid_value' },
    ]);
    assert.deepEqual(await stored(p), before);
  });

  test('a lone low surrogate in a metadata key is metadata:invalid_value at that key', async () => {
    const res = await post(p.sandbox, '/v1/send', {
      key,
      raw: JSON.stringify(validMessage({ metadata: { 'k@@': 'v' } })).replace('@@', '\\udc00'),
    });
    assertDetails(res, [{ field: 'metadata.k\udc00', code: 'metadata:invalid_value' }]);
  });

  test('a batch element with a lone surrogate is refused in its slot; the others are accepted', async () => {
    const raw = JSON.stringify({
      messages: [validMessage({ subject: 'one' }), validMessage({ subject: 'two @@' })],
    }).replace('@@', '\\udfff');
    const res = await post(p.sandbox, '/v1/send/batch', { key, raw });
    assert.equal(res.status, 207, res.text);
    assert.equal(res.body.data[0].status, 'captured');
    assert.deepEqual(res.body.data[1].error.details, [
      { field: 'subject', code: 'subject:invalid_value' },
    ]);
  });

  test('a surrogate pair ("\\ud83d\\ude00") and a real U+FFFD are text: accepted and stored as sent', async () => {
    const raw = JSON.stringify(validMessage({ subject: 'smile @@ \uFFFD' })).replace(
      '@@',
      '\\ud83d\\ude00',
    );
    const res = await post(p.sandbox, '/v1/send', { key, raw });
    assert.equal(res.status, 202, res.text);
    assert.equal(
      await getValue<string>(p.ctx.store, 'SELECT subject FROM messages WHERE id = ?', res.body.id),
      'smile 😀 \uFFFD',
    );
  });

  test('"__proto__", "constructor" and "toString" metadata keys and a "__proto__" header are kept: in the index, the mail.accepted event and the MIME', async () => {
    const raw = JSON.stringify(
      validMessage({
        metadata: { '@@': 'x', constructor: 'y', toString: 'z' },
        headers: { '@@': 'h' },
      }),
    ).replaceAll('"@@"', '"__proto__"');
    const res = await post(p.sandbox, '/v1/send', { key, raw });
    assert.equal(res.status, 202, res.text);
    const row = (await p.ctx.store.get<{ metadata: string }>(
      'SELECT metadata FROM messages WHERE id = ?',
      res.body.id,
    ))!;
    assert.equal(row.metadata, '{"__proto__":"x","constructor":"y","toString":"z"}');
    const event = (await getValue<string>(
      p.ctx.store,
      "SELECT data FROM events WHERE message_id = ? AND type = 'mail.accepted'",
      res.body.id,
    ))!;
    assert.equal(
      JSON.stringify(JSON.parse(event).mail.metadata),
      '{"__proto__":"x","constructor":"y","toString":"z"}',
    );
    const mime = (await storedMimeOf(p.ctx.store, p.stateDir, res.body.id)).toString('utf8');
    assert.match(mime, /(^|\r\n)__proto__: h\r\n/);
  });
});

/**
 * A send whose client has sent its headers and half its body, and waits: it asks for `bytes` of
 * the budget. `finish` sends the rest; `answer` is what the server answered once it closed the
 * connection (Connection: close), whichever came first.
 */
async function halfSend(
  p: TestPostern,
  key: string,
  bytes: number,
  subject: string,
): Promise<{ answer: Promise<string>; finish(): Promise<string> }> {
  const body = sized(bytes, subject);
  const url = new URL(p.sandbox);
  const socket = net.connect(Number(url.port), url.hostname);
  await new Promise((resolve) => socket.once('connect', resolve));
  let text = '';
  socket.on('data', (d) => (text += d));
  const answer = new Promise<string>((resolve) => socket.once('close', () => resolve(text)));
  socket.write(
    `POST /v1/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
  );
  socket.write(body.slice(0, bytes / 2));
  return {
    answer,
    async finish() {
      // Not half-closed: a client that sends FIN before its answer has gone away (Node drops it).
      socket.write(body.slice(bytes / 2));
      return answer;
    },
  };
}

/** A valid message whose JSON is exactly `bytes` long. */
function sized(bytes: number, subject = 'budget'): string {
  const base = JSON.stringify(validMessage({ subject, text: '' }));
  return JSON.stringify(
    validMessage({ subject, text: 'x'.repeat(bytes - Buffer.byteLength(base)) }),
  );
}

describe('the memory budget of bodies in flight (max_inflight_body_bytes 65536, body_wait_ms 1000)', () => {
  let p: TestPostern;
  let key: string;
  before(async () => {
    p = await startTestPostern({
      config: { http: { max_inflight_body_bytes: 65_536, body_wait_ms: 1000 } },
    });
    key = (await createProjectWithKeys(p.ctx, 'budget')).testKey;
  });
  after(async () => p.close());

  test('a body that does not fit waits, then gets 503 server_busy with Retry-After; nothing is stored', async () => {
    const before = await stored(p);
    // Two bodies that do not fit together, their clients holding back the second halves: one
    // takes the budget, the other waits for it, in vain, whichever came first.
    const sends = [await halfSend(p, key, 60_000, 'one'), await halfSend(p, key, 60_000, 'other')];
    const refusedAt = await Promise.race(sends.map((x, i) => x.answer.then(() => i)));
    const refused = await sends[refusedAt].answer;
    assert.match(refused, /^HTTP\/1\.1 503 /);
    assert.match(refused, /\r\nretry-after: [1-9]\d*\r\n/i);
    assert.match(refused, /"code":"server_busy"/);
    assert.deepEqual(await stored(p), before);
    assert.match(await sends[1 - refusedAt].finish(), /^HTTP\/1\.1 202 /);
  });

  test('one body larger than the whole budget is served when nothing else holds any', async () => {
    const res = await post(p.sandbox, '/v1/send', { key, raw: sized(200_000) });
    assert.equal(res.status, 202, res.text);
  });
});

describe('the memory budget of bodies in flight (max_inflight_body_bytes 65536, a wait nothing here outlasts)', () => {
  let p: TestPostern;
  let key: string;
  before(async () => {
    p = await startTestPostern({
      config: { http: { max_inflight_body_bytes: 65_536, body_wait_ms: HANG_GUARD_MS } },
    });
    key = (await createProjectWithKeys(p.ctx, 'budget')).testKey;
  });
  after(async () => p.close());

  test('a small body that fits beside a held one is served meanwhile; one that does not fit waits, and is served once the room is freed', async () => {
    const held = await halfSend(p, key, 60_000, 'held');
    // 2 KB fit beside 60 KB: served while the held send is unfinished.
    assert.equal((await post(p.sandbox, '/v1/send', { key, raw: sized(2_000) })).status, 202);
    // 20 KB do not (80 KB of 64 KB): of the two unfinished sends one holds the budget and the
    // other waits, however long, until it is freed.
    const waiting = await halfSend(p, key, 20_000, 'waited');
    const answers = await Promise.all([held.finish(), waiting.finish()]);
    for (const answer of answers) assert.match(answer, /^HTTP\/1\.1 202 /);
  });
});
