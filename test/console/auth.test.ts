/**
 * The console API's doors: sign-in, sessions (cookie, CSRF, idle expiry, sign-out), sign-in
 * throttling, operator API tokens, roles, and the refusals every operation shares — over real
 * HTTP against a real server, every answer checked against the console OpenAPI document.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generate } from 'selfsigned';
import { ManualClock } from '../../src/clock.js';
import { createOperatorToken } from '../../src/operator/operators.js';
import {
  API,
  assertDocumented,
  ConsoleClient,
  expectError,
  expectStatus,
  documentedOperations as operations,
  operatorAccount,
  PASSWORD,
  samplePath,
} from '../support/console.js';
import { capturedLogger } from '../support/fromAddress.js';
import {
  createProjectWithKeys,
  type HttpResult,
  repoRoot,
  startTestNodes,
  startTestPostern,
  type TestPostern,
  tempStateDir,
} from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';

const T0 = Date.parse('2026-11-20T09:00:00.000Z');

describe('console sessions', () => {
  const clock = new ManualClock(T0);
  let p: TestPostern;
  let owner: { id: string; email: string; password: string };

  before(async () => {
    p = await startTestPostern({
      clock,
      console: true,
      config: {
        console: {
          sign_in_failures_per_account: 3,
          sign_in_failures_per_ip: 8,
          sign_in_window_seconds: 600,
        },
      },
    });
    owner = await operatorAccount(p.ctx, 'owner@example.com', 'owner');
  });
  after(async () => p?.close());

  test('sign-in sets an HttpOnly, SameSite=Strict session cookie for /console (not Secure over plain HTTP) and returns the operator and a CSRF token', async () => {
    const client = new ConsoleClient(p.console);
    const res = await client.post('/session', { email: owner.email, password: PASSWORD });
    const body = expectStatus(res, 201);
    const cookie = res.headers.get('set-cookie')!;
    assert.match(
      cookie,
      /^postern_session=[A-Za-z0-9_-]{43}; Path=\/console; HttpOnly; SameSite=Strict$/,
    );
    assert.deepEqual(body, {
      operator: {
        id: owner.id,
        email: owner.email,
        role: 'owner',
        projects: [],
        created_at: body.operator.created_at,
        password_changed_at: body.operator.password_changed_at,
        must_change_password: false,
      },
      via: 'session',
      csrf_token: body.csrf_token,
      idle_timeout_seconds: 43200,
    });
    assert.match(body.csrf_token, /^[A-Za-z0-9_-]{43}$/);
    // The session answers who it is, with the same CSRF token (a reloaded page needs it again).
    const again = expectStatus(await client.get('/session'), 200);
    assert.deepEqual(again, body);
  });

  test('the email is matched case-insensitively', async () => {
    expectStatus(
      await new ConsoleClient(p.console).post('/session', {
        email: 'OWNER@Example.com',
        password: PASSWORD,
      }),
      201,
    );
  });

  test('a wrong password and an unknown email get the same answer', async () => {
    const wrong = await new ConsoleClient(p.console).post('/session', {
      email: owner.email,
      password: 'not the password at all',
    });
    const unknown = await new ConsoleClient(p.console).post('/session', {
      email: 'nobody@example.com',
      password: 'not the password at all',
    });
    expectError(wrong, 401, 'invalid_credentials');
    assert.equal(unknown.status, wrong.status);
    assert.deepEqual(unknown.body, wrong.body);
    assert.equal(unknown.headers.get('set-cookie'), null);
    assert.equal(wrong.headers.get('set-cookie'), null);
  });

  test('without a session or token every operation but sign-in and the document answers 401 unauthenticated', async () => {
    const anonymous = new ConsoleClient(p.console);
    for (const { template, method, op } of operations) {
      if (op.security?.length === 0) continue;
      const res = await anonymous.call(method, samplePath(template), {
        json: ['POST', 'PUT', 'PATCH'].includes(method) ? {} : undefined,
      });
      expectError(res, 401, 'unauthenticated');
    }
  });

  test('a cookie that names no session is unauthenticated', async () => {
    const forged = new ConsoleClient(p.console);
    forged.cookie = 'postern_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    expectError(await forged.get('/session'), 401, 'unauthenticated');
  });

  test('a state-changing request of a session without its CSRF token, or with a wrong one, is refused 403 and changes nothing', async () => {
    const client = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    const missing = await client.post('/projects', { name: 'csrf-missing' }, { csrf: false });
    expectError(missing, 403, 'csrf_token_invalid');
    const other = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    // Another session's token is not this session's.
    expectError(
      await client.post('/projects', { name: 'csrf-other' }, { csrf: other.csrf! }),
      403,
      'csrf_token_invalid',
    );
    expectError(
      await client.post('/projects', { name: 'csrf-garbage' }, { csrf: 'x' }),
      403,
      'csrf_token_invalid',
    );
    const projects = expectStatus(await client.get('/projects'), 200).projects.map(
      (x: any) => x.name,
    );
    assert.ok(!projects.some((n: string) => n.startsWith('csrf-')), JSON.stringify(projects));
    // Reads need none; with the token the same write goes through.
    expectStatus(await client.post('/projects', { name: 'csrf-ok' }), 201);
  });

  test('sign-out ends the session and clears the cookie; the old cookie is unauthenticated afterwards', async () => {
    const client = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    const cookie = client.cookie!;
    const res = await client.delete('/session');
    assert.equal(res.status, 204);
    assert.match(
      res.headers.get('set-cookie')!,
      /^postern_session=; Path=\/console; HttpOnly; SameSite=Strict; Max-Age=0$/,
    );
    const stale = new ConsoleClient(p.console);
    stale.cookie = cookie;
    expectError(await stale.get('/session'), 401, 'unauthenticated');
  });

  test('a session idle longer than console.session_idle_seconds is expired (401 session_expired); one in use stays', async () => {
    const active = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    const idle = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    clock.advance(11 * 3600_000);
    expectStatus(await active.get('/session'), 200);
    clock.advance(1 * 3600_000 + 1000);
    expectError(await idle.get('/session'), 401, 'session_expired');
    // Expired for good, and still said so to every request with its cookie (a reload), not a bare 401.
    expectError(await idle.get('/session'), 401, 'session_expired');
    expectStatus(await active.get('/session'), 200);
  });

  test('failed sign-ins for one email are throttled (429 with Retry-After), the same for an email no operator has, even with the right password', async () => {
    const anon = new ConsoleClient(p.console);
    for (const email of ['throttled@example.com', 'member-to-be@example.com']) {
      for (let i = 0; i < 3; i++)
        expectError(
          await anon.post('/session', { email, password: 'wrong password here' }),
          401,
          'invalid_credentials',
        );
    }
    const known = await operatorAccount(p.ctx, 'throttled@example.com', 'owner');
    const refused = await anon.post('/session', { email: known.email, password: PASSWORD });
    expectError(refused, 429, 'sign_in_throttled');
    const unknownRefused = await anon.post('/session', {
      email: 'member-to-be@example.com',
      password: 'wrong password here',
    });
    expectError(unknownRefused, 429, 'sign_in_throttled');
    const retryAfter = Number(refused.headers.get('retry-after'));
    assert.ok(retryAfter > 0 && retryAfter <= 600, String(retryAfter));
    assert.equal(unknownRefused.headers.get('retry-after'), refused.headers.get('retry-after'));
    // Other accounts are not held by it; once the window has passed the right password works.
    expectStatus(await anon.post('/session', { email: owner.email, password: PASSWORD }), 201);
    clock.advance(retryAfter * 1000);
    expectStatus(await anon.post('/session', { email: known.email, password: PASSWORD }), 201);
  });

  test('failed sign-ins from one address are throttled across emails', async () => {
    clock.advance(3600_000);
    const anon = new ConsoleClient(p.console);
    for (let i = 0; i < 8; i++)
      expectError(
        await anon.post('/session', {
          email: `spray-${i}@example.com`,
          password: 'wrong password here',
        }),
        401,
        'invalid_credentials',
      );
    const res = await anon.post('/session', { email: owner.email, password: PASSWORD });
    expectError(res, 429, 'sign_in_throttled');
    assert.ok(Number(res.headers.get('retry-after')) > 0);
    clock.advance(601_000);
    expectStatus(await anon.post('/session', { email: owner.email, password: PASSWORD }), 201);
  });

  test('an operator API token authenticates without CSRF; it is shown once, listed by hint only; revoked or expired it is refused', async () => {
    const session = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    const created = expectStatus(
      await session.post('/tokens', {
        name: 'deploy script',
        expires_at: new Date(clock.now() + 2 * 3600_000).toISOString(),
      }),
      201,
    );
    assert.match(created.token, /^pso_[A-Za-z0-9]{40}$/);
    assert.equal(created.hint, `pso_…${created.token.slice(-4)}`);
    const list = expectStatus(await session.get('/tokens'), 200);
    assert.ok(!JSON.stringify(list).includes(created.token));
    assert.deepEqual(
      list.tokens.find((t: any) => t.id === created.id),
      {
        id: created.id,
        operator_id: owner.id,
        name: 'deploy script',
        hint: created.hint,
        created_at: created.created_at,
        expires_at: created.expires_at,
        last_used_at: null,
        revoked_at: null,
        state: 'active',
      },
    );
    const script = session.withToken(created.token);
    const me = expectStatus(await script.get('/session'), 200);
    assert.deepEqual(
      [me.via, me.csrf_token, me.idle_timeout_seconds, me.operator.id],
      ['token', null, null, owner.id],
    );
    // No CSRF header, and the write goes through.
    expectStatus(await script.post('/projects', { name: 'made by a script' }), 201);
    const used = expectStatus(await session.get('/tokens'), 200).tokens.find(
      (t: any) => t.id === created.id,
    );
    assert.equal(used.last_used_at, new Date(clock.now()).toISOString());

    expectError(
      await script.withToken(`pso_${'A'.repeat(40)}`).get('/session'),
      401,
      'invalid_operator_token',
    );
    expectError(
      await script.withToken('not-a-token').get('/session'),
      401,
      'invalid_operator_token',
    );
    clock.advance(2 * 3600_000);
    expectError(await script.get('/session'), 401, 'invalid_operator_token');

    const second = expectStatus(await session.post('/tokens', { name: 'second' }), 201);
    const revoked = expectStatus(await session.delete(`/tokens/${second.id}`), 200);
    assert.equal(revoked.state, 'revoked');
    expectError(
      await session.withToken(second.token).get('/session'),
      401,
      'invalid_operator_token',
    );
  });

  test('a token made with the CLI (operator token create) works the same', async () => {
    const made = await createOperatorToken(p.ctx, owner.id, 'from the cli');
    expectStatus(await new ConsoleClient(p.console).withToken(made.token).get('/projects'), 200);
  });

  test('changing your password needs the current one; the new one signs in, the old no longer; your other sessions end, this one stays', async () => {
    const me = await operatorAccount(p.ctx, 'changer@example.com', 'owner');
    const here = await ConsoleClient.signIn(p.console, me.email, PASSWORD);
    const elsewhere = await ConsoleClient.signIn(p.console, me.email, PASSWORD);
    const wrong = await here.put('/session/password', {
      current_password: 'wrong password here',
      new_password: 'another long password',
    });
    assert.deepEqual(expectError(wrong, 422, 'current_password:invalid_value').details, [
      { field: 'current_password', code: 'current_password:invalid_value' },
    ]);
    const short = await here.put('/session/password', {
      current_password: PASSWORD,
      new_password: 'short',
    });
    assert.deepEqual(expectError(short, 422, 'new_password:too_short').details, [
      { field: 'new_password', code: 'new_password:too_short' },
    ]);
    assert.deepEqual(
      expectStatus(
        await here.put('/session/password', {
          current_password: PASSWORD,
          new_password: 'another long password',
        }),
        200,
      ),
      { sessions_ended: 1, tokens_revoked: 0, tokens_active: 0 },
    );
    expectStatus(await here.get('/session'), 200);
    expectError(await elsewhere.get('/session'), 401, 'unauthenticated');
    expectError(
      await new ConsoleClient(p.console).post('/session', { email: me.email, password: PASSWORD }),
      401,
      'invalid_credentials',
    );
    expectStatus(
      await new ConsoleClient(p.console).post('/session', {
        email: me.email,
        password: 'another long password',
      }),
      201,
    );
  });

  test('a member is refused every owner-only operation with 403 forbidden, and changes nothing', async () => {
    const pk = await createProjectWithKeys(p.ctx, 'member project');
    const member = await operatorAccount(p.ctx, 'member@example.com', 'member', [pk.project.id]);
    const client = await ConsoleClient.signIn(p.console, member.email, PASSWORD);
    const ownerOnly = operations.filter((o) => o.op['x-role'] === 'owner');
    assert.ok(ownerOnly.length >= 15, String(ownerOnly.length));
    for (const { template, method } of ownerOnly) {
      const res = await client.call(
        method,
        samplePath(template).replace('p.nosuchproject00000000', pk.project.id),
        { json: ['POST', 'PUT', 'PATCH'].includes(method) ? {} : undefined },
      );
      expectError(res, 403, 'forbidden');
    }
    assert.equal(expectStatus(await client.get(`/projects/${pk.project.id}`), 200).paused, false);
  });

  test('malformed requests get the contract envelope: 400 invalid JSON, 415 media type, 422 with details, 404 unknown path, 405 with Allow', async () => {
    const client = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    expectError(
      await client.call('POST', '/projects', { raw: '{"name":' }),
      400,
      'body:invalid_json',
    );
    expectError(
      await client.call('POST', '/projects', {
        raw: 'name=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      415,
      'body:unsupported_media_type',
    );
    const invalid = expectError(
      await client.post('/projects', { name: '', colour: 'red' }),
      422,
      'name:too_short',
    );
    assert.deepEqual(invalid.details, [
      { field: 'name', code: 'name:too_short' },
      { field: 'colour', code: 'colour:unknown_key' },
    ]);
    const query = expectError(
      await client.get('/messages?limit=0&bogus=1'),
      422,
      'limit:out_of_range',
    );
    assert.deepEqual(query.details, [
      { field: 'limit', code: 'limit:out_of_range' },
      { field: 'bogus', code: 'bogus:unknown_key' },
    ]);
    const unknown = await client.get('/nothing-here', { unchecked: true });
    expectError(unknown, 404, 'not_found');
    const wrongMethod = await client.call('PUT', '/projects', { json: {}, unchecked: true });
    expectError(wrongMethod, 405, 'method_not_allowed');
    assert.equal(wrongMethod.headers.get('allow'), 'GET, POST');
    // An id that cannot be one is as unknown as one that is not there.
    expectError(await client.get('/messages/not-an-id'), 404, 'not_found');
  });

  test('GET /openapi.json serves the document without authentication', async () => {
    const res = await fetch(`${p.console}${API}/openapi.json`);
    assert.equal(res.status, 200);
    assert.deepEqual(
      await res.json(),
      JSON.parse(readFileSync(path.join(repoRoot, 'src/console/openapi.json'), 'utf8')),
    );
  });

  test('every operation of the document has its route: none answers 404 or 405 for its own path and method', async () => {
    const client = await ConsoleClient.signIn(p.console, owner.email, PASSWORD);
    for (const { template, method } of operations) {
      if (
        template === '/events/stream' ||
        template === '/session' ||
        template.endsWith('/raw') ||
        template.includes('/attachments/') ||
        template.endsWith('.csv')
      )
        continue;
      const res = await client.call(method, samplePath(template), {
        json: ['POST', 'PUT', 'PATCH'].includes(method) ? {} : undefined,
      });
      assert.notEqual(res.body?.error?.code, 'method_not_allowed', `${method} ${template}`);
      if (res.status === 404)
        assert.notEqual(res.body.error.message, 'No such endpoint.', `${method} ${template}`);
    }
  });
});

describe('a session with console.session_idle_seconds 60 (the minimum)', () => {
  const clock = new ManualClock(T0);
  let p: TestPostern;

  before(async () => {
    p = await startTestPostern({
      clock,
      console: true,
      config: { console: { session_idle_seconds: 60 } },
    });
    await operatorAccount(p.ctx, 'owner@example.com', 'owner');
  });
  after(async () => p?.close());

  test('a session used every 50 s stays signed in for 10 minutes; left unused for 61 s it expires', async () => {
    const session = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
    for (let i = 1; i <= 12; i++) {
      clock.advance(50_000);
      const res = await session.get('/session');
      assert.equal(res.status, 200, `request ${i}, ${i * 50} s after sign-in: ${res.text}`);
    }
    clock.advance(61_000);
    expectError(await session.get('/session'), 401, 'session_expired');
  });

  test('a session used at uneven gaps, each shorter than 45 s (three quarters of the idle time), stays signed in', async () => {
    const session = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
    for (const [i, gap] of [5, 44, 1, 40, 14, 44, 3, 44, 10, 44].entries()) {
      clock.advance(gap * 1000);
      const res = await session.get('/session');
      assert.equal(res.status, 200, `request ${i + 1}, after ${gap} s: ${res.text}`);
    }
  });
});

describe('failed sign-in limits against attempts sent at once (5 per email, 8 per address, 600 s)', () => {
  const PER_ACCOUNT = 5;
  const PER_IP = 8;
  const clock = new ManualClock(T0);
  let p: TestPostern;

  before(async () => {
    // The test as the trusted proxy: each attempt names its client address (X-Forwarded-For).
    p = await startTestPostern({
      clock,
      console: true,
      config: {
        http: { trusted_proxies: ['127.0.0.1'] },
        console: {
          sign_in_failures_per_account: PER_ACCOUNT,
          sign_in_failures_per_ip: PER_IP,
          sign_in_window_seconds: 600,
        },
      },
    });
    for (const email of ['guessed@example.com', 'regular@example.com'])
      await operatorAccount(p.ctx, email, 'owner');
  });
  after(async () => p?.close());

  const attempt = (address: string, email: string, password: string) =>
    new ConsoleClient(p.console).post(
      '/session',
      { email, password },
      { headers: { 'x-forwarded-for': address } },
    );
  const WRONG = 'not the password at all';

  /** 401 invalid_credentials, or 429 sign_in_throttled with the whole window to wait (the clock stands still); the answers counted by status. */
  function tally(answers: HttpResult[]): Record<number, number> {
    const counts: Record<number, number> = {};
    for (const res of answers) {
      if (res.status === 401) expectError(res, 401, 'invalid_credentials');
      else {
        expectError(res, 429, 'sign_in_throttled');
        assert.equal(res.headers.get('retry-after'), '600');
      }
      counts[res.status] = (counts[res.status] ?? 0) + 1;
    }
    return counts;
  }

  test('20 wrong passwords for one email sent at once (one address each): exactly 5 are checked and answered 401 invalid_credentials, the other 15 429 sign_in_throttled with Retry-After; then the right password is refused 429 too', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        attempt(`198.51.100.${i + 1}`, 'guessed@example.com', WRONG),
      ),
    );
    assert.deepEqual(tally(answers), { 401: PER_ACCOUNT, 429: 20 - PER_ACCOUNT });
    assert.deepEqual(tally([await attempt('198.51.100.99', 'guessed@example.com', PASSWORD)]), {
      429: 1,
    });
  });

  test('20 wrong passwords from one address sent at once, for 20 emails: exactly 8 are answered 401, the other 12 429', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        attempt('203.0.113.20', `sprayed-${i}@example.com`, WRONG),
      ),
    );
    assert.deepEqual(tally(answers), { 401: PER_IP, 429: 20 - PER_IP });
    assert.deepEqual(tally([await attempt('203.0.113.20', 'regular@example.com', PASSWORD)]), {
      429: 1,
    });
  });

  test('right passwords use up nothing: after 10 sign-ins in a row, 5 wrong passwords are answered 401 and the 6th 429', async () => {
    for (let i = 0; i < 10; i++)
      expectStatus(await attempt('203.0.113.30', 'regular@example.com', PASSWORD), 201);
    for (let i = 0; i < PER_ACCOUNT; i++)
      expectError(
        await attempt(`203.0.113.${31 + i}`, 'regular@example.com', WRONG),
        401,
        'invalid_credentials',
      );
    assert.deepEqual(tally([await attempt('203.0.113.39', 'regular@example.com', WRONG)]), {
      429: 1,
    });
  });

  test("an attempt refused because one window is spent takes no place in the other: the spent email's refusals leave the address its 8 failures, the spent address's leave a new email its 5", async () => {
    // guessed@example.com and 203.0.113.20 were spent by the tests above.
    for (let i = 0; i < 10; i++)
      assert.deepEqual(tally([await attempt('203.0.113.40', 'guessed@example.com', WRONG)]), {
        429: 1,
      });
    for (let i = 0; i < PER_IP; i++)
      expectError(
        await attempt('203.0.113.40', `other-${i}@example.com`, WRONG),
        401,
        'invalid_credentials',
      );
    assert.deepEqual(tally([await attempt('203.0.113.40', 'another@example.com', WRONG)]), {
      429: 1,
    });

    for (let i = 0; i < 10; i++)
      assert.deepEqual(tally([await attempt('203.0.113.20', 'fresh@example.com', WRONG)]), {
        429: 1,
      });
    for (let i = 0; i < PER_ACCOUNT; i++)
      expectError(
        await attempt(`203.0.113.${50 + i}`, 'fresh@example.com', WRONG),
        401,
        'invalid_credentials',
      );
    assert.deepEqual(tally([await attempt('203.0.113.59', 'fresh@example.com', WRONG)]), {
      429: 1,
    });
  });
});

describe('console over TLS', () => {
  let p: TestPostern;
  let ca: string;
  before(async () => {
    const dir = tempStateDir('postern-console-tls-');
    const pems = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
      keySize: 2048,
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
    });
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path.join(dir, 'console.crt'), pems.cert);
    writeFileSync(path.join(dir, 'console.key'), pems.private);
    ca = pems.cert;
    p = await startTestPostern({
      console: { cert: path.join(dir, 'console.crt'), key: path.join(dir, 'console.key') },
    });
    await operatorAccount(p.ctx, 'tls@example.com', 'owner');
  });
  after(async () => p?.close());

  test('a console listener with cert and key serves HTTPS, and its session cookie is Secure', async () => {
    assert.match(p.console, /^https:\/\/127\.0\.0\.1:\d+$/);
    const body = JSON.stringify({ email: 'tls@example.com', password: PASSWORD });
    const res = await new Promise<{ status: number; cookie: string; text: string }>(
      (resolve, reject) => {
        const req = https.request(
          `${p.console}${API}/session`,
          {
            method: 'POST',
            ca,
            headers: {
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (r) => {
            let text = '';
            r.on('data', (c) => (text += c));
            r.on('end', () =>
              resolve({ status: r.statusCode ?? 0, cookie: String(r.headers['set-cookie']), text }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      },
    );
    assert.equal(res.status, 201, res.text);
    assert.match(res.cookie, /; HttpOnly; SameSite=Strict; Secure$/);
    assertDocumented('POST', `${API}/session`, {
      status: res.status,
      headers: new Headers({ 'content-type': 'application/json' }),
      body: JSON.parse(res.text),
      text: res.text,
    });
  });
});

describe('sign-in while the shared failed sign-in windows cannot be counted (a node on PostgreSQL)', {
  skip: postgresUnavailable(),
}, () => {
  const log = capturedLogger('info');
  const LOGGED = 'the sign-in limits could not be counted (the store failed); sign-in refused';
  let nodes: Awaited<ReturnType<typeof startTestNodes>>;
  let node: TestPostern;

  before(async () => {
    nodes = await startTestNodes(1, { console: true, logger: log.logger });
    node = nodes.nodes[0];
    await operatorAccount(node.ctx, 'owner@example.com', 'owner');
  });
  after(async () => nodes?.close());

  test('sign-in answers 500 server_error before any password is checked (the right one signs nobody in), logs why without the email or password, and works again once the windows answer', async () => {
    const attempt = (email: string, password: string) =>
      new ConsoleClient(node.console).post('/session', { email, password });
    // The windows' slots gone for a moment: every read or count of a window fails, while operators are still read.
    await node.ctx.store.run('ALTER TABLE rate_window_slots RENAME TO rate_window_slots_away');
    try {
      const res = await attempt('owner@example.com', PASSWORD);
      assert.deepEqual(
        [res.status, res.body, res.headers.get('set-cookie')],
        [
          500,
          {
            error: {
              type: 'api_error',
              code: 'server_error',
              message: 'Sign-in is unavailable for a moment; retry shortly.',
            },
          },
          null,
        ],
      );
      expectError(await attempt('Guessed@Example.com', 'a guessed password'), 500, 'server_error');
    } finally {
      await node.ctx.store.run('ALTER TABLE rate_window_slots_away RENAME TO rate_window_slots');
    }
    assert.equal(
      await node.ctx.store
        .get<{ n: number }>('SELECT COUNT(*) AS n FROM operator_sessions')
        .then((r) => Number(r!.n)),
      0,
      'no session was made',
    );
    const lines = log.lines.filter((l) => l.msg === LOGGED);
    assert.deepEqual(
      lines.map((l) => [
        l.level,
        l.step,
        /rate_window_slots/.test(String((l.err as { message?: unknown } | undefined)?.message)),
      ]),
      [
        [50, 'reserve', true],
        [50, 'reserve', true],
      ],
    );
    const logged = JSON.stringify(log.lines);
    for (const secret of [
      PASSWORD,
      'a guessed password',
      'owner@example.com',
      'guessed@example.com',
      'Guessed@Example.com',
    ])
      assert.ok(!logged.includes(secret), `${secret} is in the log`);
    expectStatus(await attempt('owner@example.com', PASSWORD), 201);
  });

  test('a password change answers 500 server_error before the current password is checked, and changes nothing', async () => {
    const session = await ConsoleClient.signIn(node.console, 'owner@example.com', PASSWORD);
    await node.ctx.store.run('ALTER TABLE rate_window_slots RENAME TO rate_window_slots_away');
    try {
      const res = await session.put('/session/password', {
        current_password: PASSWORD,
        new_password: 'another long password',
      });
      assert.deepEqual(
        [res.status, res.body],
        [
          500,
          {
            error: {
              type: 'api_error',
              code: 'server_error',
              message: 'The password cannot be checked for a moment; retry shortly.',
            },
          },
        ],
      );
    } finally {
      await node.ctx.store.run('ALTER TABLE rate_window_slots_away RENAME TO rate_window_slots');
    }
    assert.equal(
      log.lines.filter(
        (l) =>
          l.msg ===
          'the sign-in limits could not be counted (the store failed); password change refused',
      ).length,
      1,
    );
    expectStatus(await session.get('/session'), 200);
    expectStatus(
      await new ConsoleClient(node.console).post('/session', {
        email: 'owner@example.com',
        password: PASSWORD,
      }),
      201,
    );
  });
});
