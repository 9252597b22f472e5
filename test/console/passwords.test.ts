/**
 * Password changes and resets over real HTTP against a real server (issue 32, items 7 and 8):
 * wrong current passwords count in the failed sign-in limits, as sign-ins do; what a change and
 * a reset do to the operator's other sessions and `pso_` tokens.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import {
  ConsoleClient,
  expectError,
  expectStatus,
  operatorAccount,
  PASSWORD,
} from '../support/console.js';
import { type HttpResult, startTestPostern, type TestPostern } from '../support/postern.js';

const T0 = Date.parse('2026-11-20T09:00:00.000Z');
const WRONG = 'not the password at all';
const NEW_PASSWORD = 'another long password';

describe('wrong current passwords count in the failed sign-in limits (3 per email, 8 per address, 600 s)', () => {
  const PER_ACCOUNT = 3;
  const PER_IP = 8;
  const clock = new ManualClock(T0);
  let p: TestPostern;

  before(async () => {
    // The test as the trusted proxy: each request names its client address (X-Forwarded-For).
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
  });
  after(async () => p?.close());

  /** A session of a new operator, signed in from an address of its own. */
  async function sessionOf(email: string): Promise<ConsoleClient> {
    await operatorAccount(p.ctx, email, 'owner');
    return ConsoleClient.signIn(p.console, email, PASSWORD);
  }
  const change = (client: ConsoleClient, address: string, current: string, next = NEW_PASSWORD) =>
    client.put(
      '/session/password',
      { current_password: current, new_password: next },
      { headers: { 'x-forwarded-for': address } },
    );
  const signIn = (address: string, email: string, password: string) =>
    new ConsoleClient(p.console).post(
      '/session',
      { email, password },
      { headers: { 'x-forwarded-for': address } },
    );

  /** 422 current_password:invalid_value (checked, wrong), or 429 sign_in_throttled with the window's Retry-After (not checked); counted by status. */
  function tally(answers: HttpResult[]): Record<number, number> {
    const counts: Record<number, number> = {};
    for (const res of answers) {
      if (res.status === 422) expectError(res, 422, 'current_password:invalid_value');
      else {
        expectError(res, 429, 'sign_in_throttled');
        assert.equal(res.headers.get('retry-after'), '600');
      }
      counts[res.status] = (counts[res.status] ?? 0) + 1;
    }
    return counts;
  }

  test('3 wrong current passwords are answered 422, the 4th 429 sign_in_throttled with Retry-After, the right one too (unchanged); sign-in to that email is held as well; after the window the right one changes it', async () => {
    const session = await sessionOf('stolen@example.com');
    for (let i = 0; i < PER_ACCOUNT; i++)
      assert.deepEqual(tally([await change(session, `198.51.100.${i + 1}`, WRONG)]), { 422: 1 });
    assert.deepEqual(tally([await change(session, '198.51.100.10', WRONG)]), { 429: 1 });
    assert.deepEqual(tally([await change(session, '198.51.100.11', PASSWORD)]), { 429: 1 });
    // The email's window is the sign-in's: the right password is held back there too.
    expectError(
      await signIn('198.51.100.12', 'stolen@example.com', PASSWORD),
      429,
      'sign_in_throttled',
    );
    clock.advance(600_000);
    // The refused change changed nothing: the old password signs in, then changes.
    expectStatus(await signIn('198.51.100.13', 'stolen@example.com', PASSWORD), 201);
    expectStatus(await change(session, '198.51.100.14', PASSWORD), 200);
    expectStatus(await signIn('198.51.100.15', 'stolen@example.com', NEW_PASSWORD), 201);
  });

  test('25 wrong current passwords sent at once (an address each): exactly 3 are checked (422), the other 22 answered 429', async () => {
    const session = await sessionOf('raced@example.com');
    const answers = await Promise.all(
      Array.from({ length: 25 }, (_, i) => change(session, `192.0.2.${i + 1}`, WRONG)),
    );
    assert.deepEqual(tally(answers), { 422: PER_ACCOUNT, 429: 25 - PER_ACCOUNT });
    assert.deepEqual(tally([await change(session, '192.0.2.99', PASSWORD)]), { 429: 1 });
  });

  test('failed sign-ins and wrong current passwords from one address count together: 6 + 2, then the address is held (its session’s own email had 1 left)', async () => {
    const session = await sessionOf('sprayer@example.com');
    const address = '203.0.113.20';
    for (let i = 0; i < PER_IP - 2; i++)
      expectError(
        await signIn(address, `sprayed-${i}@example.com`, WRONG),
        401,
        'invalid_credentials',
      );
    for (let i = 0; i < 2; i++)
      assert.deepEqual(tally([await change(session, address, WRONG)]), { 422: 1 });
    assert.deepEqual(tally([await change(session, address, WRONG)]), { 429: 1 });
    // From another address the email's last failure is still there to spend.
    assert.deepEqual(tally([await change(session, '203.0.113.21', WRONG)]), { 422: 1 });
    assert.deepEqual(tally([await change(session, '203.0.113.22', WRONG)]), { 429: 1 });
  });

  test('right current passwords use up nothing, nor do changes refused for the new password: after 4 changes and 4 too-short ones, 3 wrong current passwords are answered 422 and the 4th 429', async () => {
    const session = await sessionOf('regular@example.com');
    let current = PASSWORD;
    for (let i = 0; i < 4; i++) {
      const next = `${NEW_PASSWORD} ${i}`;
      expectStatus(await change(session, '203.0.113.30', current, next), 200);
      current = next;
    }
    for (let i = 0; i < 4; i++)
      expectError(
        await change(session, '203.0.113.30', WRONG, 'short'),
        422,
        'new_password:too_short',
      );
    for (let i = 0; i < PER_ACCOUNT; i++)
      assert.deepEqual(tally([await change(session, `203.0.113.${31 + i}`, WRONG)]), { 422: 1 });
    assert.deepEqual(tally([await change(session, '203.0.113.39', current)]), { 429: 1 });
  });
});

describe('a password change or reset and the operator’s other sessions and API tokens', () => {
  const clock = new ManualClock(T0);
  let p: TestPostern;
  let owner: ConsoleClient;

  before(async () => {
    p = await startTestPostern({ clock, console: true });
    await operatorAccount(p.ctx, 'owner@example.com', 'owner');
    owner = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
  });
  after(async () => p?.close());

  /** A member signed in twice, with two tokens of their own; its id. */
  async function memberWithTokens(email: string) {
    const { id } = await operatorAccount(p.ctx, email, 'member');
    const here = await ConsoleClient.signIn(p.console, email, PASSWORD);
    const elsewhere = await ConsoleClient.signIn(p.console, email, PASSWORD);
    const tokens: string[] = [];
    for (const name of ['backup', 'deploy'])
      tokens.push(expectStatus(await here.post('/tokens', { name }), 201).token);
    const [scriptA, scriptB] = tokens.map((t) => here.withToken(t));
    return { id, here, elsewhere, scriptA, scriptB };
  }
  /** [name, state] of the client's tokens, by name. */
  const tokenStates = async (client: ConsoleClient) =>
    expectStatus(await client.get('/tokens'), 200)
      .tokens.map((t: { name: string; state: string }) => [t.name, t.state])
      .sort((x: string[], y: string[]) => x[0].localeCompare(y[0]));

  test("an owner's reset ends every session of the operator and revokes their tokens, and says so", async () => {
    const m = await memberWithTokens('reset@example.com');
    const reset = expectStatus(await owner.post(`/operators/${m.id}/reset-password`), 200);
    for (const session of [m.here, m.elsewhere])
      expectError(await session.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB])
      expectError(await script.get('/session'), 401, 'invalid_operator_token');
    assert.deepEqual(
      { ...reset, password: typeof reset.password },
      {
        id: m.id,
        email: 'reset@example.com',
        password: 'string',
        sessions_ended: 2,
        tokens_revoked: 2,
      },
    );
    const again = await ConsoleClient.signIn(p.console, 'reset@example.com', reset.password);
    // A generated password is changed before anything else (the tokens listed after).
    expectStatus(
      await again.put('/session/password', {
        current_password: reset.password,
        new_password: NEW_PASSWORD,
      }),
      200,
    );
    assert.deepEqual(await tokenStates(again), [
      ['backup', 'revoked'],
      ['deploy', 'revoked'],
    ]);
    const audit = expectStatus(
      await owner.get('/audit?action=operator.reset_password'),
      200,
    ).entries.find((e: { target: string }) => e.target === m.id);
    assert.deepEqual(audit.details, { sessions_ended: 2, tokens_revoked: 2 });
  });

  test('a reset with keep_tokens ends the sessions and leaves the tokens working', async () => {
    const m = await memberWithTokens('keeps@example.com');
    const reset = expectStatus(
      await owner.post(`/operators/${m.id}/reset-password`, { keep_tokens: true }),
      200,
    );
    assert.deepEqual([reset.sessions_ended, reset.tokens_revoked], [2, 0]);
    expectError(await m.here.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB]) expectStatus(await script.get('/session'), 200);
  });

  test('changing your own password ends your other sessions and keeps your tokens (the answer counts them); with revoke_tokens it revokes them too', async () => {
    const m = await memberWithTokens('changes@example.com');
    const kept = expectStatus(
      await m.here.put('/session/password', {
        current_password: PASSWORD,
        new_password: NEW_PASSWORD,
      }),
      200,
    );
    assert.deepEqual(kept, { sessions_ended: 1, tokens_revoked: 0, tokens_active: 2 });
    expectStatus(await m.here.get('/session'), 200);
    expectError(await m.elsewhere.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB]) expectStatus(await script.get('/session'), 200);

    const elsewhere = await ConsoleClient.signIn(p.console, 'changes@example.com', NEW_PASSWORD);
    const revoked = expectStatus(
      await m.here.put('/session/password', {
        current_password: NEW_PASSWORD,
        new_password: PASSWORD,
        revoke_tokens: true,
      }),
      200,
    );
    assert.deepEqual(revoked, { sessions_ended: 1, tokens_revoked: 2, tokens_active: 0 });
    expectStatus(await m.here.get('/session'), 200);
    expectError(await elsewhere.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB])
      expectError(await script.get('/session'), 401, 'invalid_operator_token');
    assert.deepEqual(await tokenStates(m.here), [
      ['backup', 'revoked'],
      ['deploy', 'revoked'],
    ]);
  });

  test('a change made with a token (no session of its own) ends every session; revoke_tokens revokes that token as well', async () => {
    const m = await memberWithTokens('scripted@example.com');
    const answer = expectStatus(
      await m.scriptA.put('/session/password', {
        current_password: PASSWORD,
        new_password: NEW_PASSWORD,
        revoke_tokens: true,
      }),
      200,
    );
    assert.deepEqual(answer, { sessions_ended: 2, tokens_revoked: 2, tokens_active: 0 });
    expectError(await m.here.get('/session'), 401, 'unauthenticated');
    expectError(await m.scriptA.get('/session'), 401, 'invalid_operator_token');
  });
});
