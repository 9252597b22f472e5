/**
 * Password changes and resets over real HTTP against a real server (issue 32, item 8): what a
 * change and a reset do to the operator's other sessions and `pso_` tokens.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { ConsoleClient, expectError, expectStatus, operatorAccount, PASSWORD } from '../support/console.js';
import { startTestPostern, type TestPostern } from '../support/postern.js';

const T0 = Date.parse('2026-11-20T09:00:00.000Z');
const NEW_PASSWORD = 'another long password';

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
    for (const name of ['backup', 'deploy']) tokens.push(expectStatus(await here.post('/tokens', { name }), 201).token);
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
    for (const session of [m.here, m.elsewhere]) expectError(await session.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB]) expectError(await script.get('/session'), 401, 'invalid_operator_token');
    assert.deepEqual({ ...reset, password: typeof reset.password }, { id: m.id, email: 'reset@example.com', password: 'string', sessions_ended: 2, tokens_revoked: 2 });
    const again = await ConsoleClient.signIn(p.console, 'reset@example.com', reset.password);
    assert.deepEqual(await tokenStates(again), [['backup', 'revoked'], ['deploy', 'revoked']]);
    const audit = expectStatus(await owner.get('/audit?action=operator.reset_password'), 200).entries.find((e: { target: string }) => e.target === m.id);
    assert.deepEqual(audit.details, { sessions_ended: 2, tokens_revoked: 2 });
  });

  test('a reset with keep_tokens ends the sessions and leaves the tokens working', async () => {
    const m = await memberWithTokens('keeps@example.com');
    const reset = expectStatus(await owner.post(`/operators/${m.id}/reset-password`, { keep_tokens: true }), 200);
    assert.deepEqual([reset.sessions_ended, reset.tokens_revoked], [2, 0]);
    expectError(await m.here.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB]) expectStatus(await script.get('/session'), 200);
  });

  test('changing your own password ends your other sessions and keeps your tokens (the answer counts them); with revoke_tokens it revokes them too', async () => {
    const m = await memberWithTokens('changes@example.com');
    const kept = expectStatus(await m.here.put('/session/password', { current_password: PASSWORD, new_password: NEW_PASSWORD }), 200);
    assert.deepEqual(kept, { sessions_ended: 1, tokens_revoked: 0, tokens_active: 2 });
    expectStatus(await m.here.get('/session'), 200);
    expectError(await m.elsewhere.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB]) expectStatus(await script.get('/session'), 200);

    const elsewhere = await ConsoleClient.signIn(p.console, 'changes@example.com', NEW_PASSWORD);
    const revoked = expectStatus(await m.here.put('/session/password', { current_password: NEW_PASSWORD, new_password: PASSWORD, revoke_tokens: true }), 200);
    assert.deepEqual(revoked, { sessions_ended: 1, tokens_revoked: 2, tokens_active: 0 });
    expectStatus(await m.here.get('/session'), 200);
    expectError(await elsewhere.get('/session'), 401, 'unauthenticated');
    for (const script of [m.scriptA, m.scriptB]) expectError(await script.get('/session'), 401, 'invalid_operator_token');
    assert.deepEqual(await tokenStates(m.here), [['backup', 'revoked'], ['deploy', 'revoked']]);
  });

  test('a change made with a token (no session of its own) ends every session; revoke_tokens revokes that token as well', async () => {
    const m = await memberWithTokens('scripted@example.com');
    const answer = expectStatus(await m.scriptA.put('/session/password', { current_password: PASSWORD, new_password: NEW_PASSWORD, revoke_tokens: true }), 200);
    assert.deepEqual(answer, { sessions_ended: 2, tokens_revoked: 2, tokens_active: 0 });
    expectError(await m.here.get('/session'), 401, 'unauthenticated');
    expectError(await m.scriptA.get('/session'), 401, 'invalid_operator_token');
  });
});
