/**
 * A generated password must be changed at the first sign-in: `operator create` and
 * `reset-password` without a chosen password (the CLI and the console API alike) set the
 * operator's `must_change_password`; until `PUT /session/password` clears it, their session or
 * token gets `403 password_change_required` from every operation but that one, `GET /session`
 * and sign-out. Real server, real CLI, every answer checked against the console document.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ConsoleClient,
  documentedOperations,
  expectError,
  expectStatus,
  operatorAccount,
  PASSWORD,
  samplePath,
} from '../support/console.js';
import { cliEnv, runCli, startTestPostern, type TestPostern } from '../support/postern.js';

describe('a generated password is changed first', () => {
  let p: TestPostern;
  let owner: ConsoleClient;

  /** The CLI's JSON answer (exit 0). */
  async function cli(args: string[], input?: string): Promise<any> {
    const r = await runCli([...args, '--json'], cliEnv(p), input);
    assert.equal(r.code, 0, r.stderr);
    return r.json;
  }

  before(async () => {
    p = await startTestPostern({ console: true });
    await operatorAccount(p.ctx, 'owner@example.com', 'owner');
    owner = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
  });
  after(async () => p?.close());

  test('operator create (generated password): every operation but the change, GET /session and sign-out answers 403 password_change_required; changed, everything works and the flag is gone', async () => {
    const created = await cli([
      'operator',
      'create',
      '--email',
      'first@example.com',
      '--role',
      'owner',
    ]);
    const client = await ConsoleClient.signIn(p.console, 'first@example.com', created.password);
    const session = expectStatus(await client.get('/session'), 200);
    assert.equal(session.operator.must_change_password, true);

    const allowed = documentedOperations
      .filter((o) => o.op['x-before-password-change'])
      .map((o) => o.op.operationId);
    assert.deepEqual(allowed.sort(), ['changePassword', 'getSession', 'signOut']);
    const refused = documentedOperations.filter(
      (o) => !o.op['x-before-password-change'] && o.op.security === undefined,
    );
    assert.ok(refused.length >= 50, String(refused.length));
    for (const { template, method } of refused) {
      const res = await client.call(method, samplePath(template), {
        json: ['POST', 'PUT', 'PATCH'].includes(method) ? {} : undefined,
      });
      const error = expectError(res, 403, 'password_change_required');
      assert.match(
        error.message,
        /change it first \(PUT \/console\/api\/v1\/session\/password\)/,
        `${method} ${template}`,
      );
    }

    // The new password must be another one.
    expectError(
      await client.put('/session/password', {
        current_password: created.password,
        new_password: created.password,
      }),
      422,
      'new_password:unchanged',
    );
    assert.equal(
      (
        await client.put('/session/password', {
          current_password: created.password,
          new_password: 'first owner chosen password',
        })
      ).status,
      200,
    );
    assert.equal(
      expectStatus(await client.get('/session'), 200).operator.must_change_password,
      false,
    );
    expectStatus(await client.get('/projects'), 200);
    const listed = expectStatus(await owner.get('/operators'), 200).operators.find(
      (o: { email: string }) => o.email === 'first@example.com',
    );
    assert.equal(listed.must_change_password, false);
    expectError(
      await new ConsoleClient(p.console).post('/session', {
        email: 'first@example.com',
        password: created.password,
      }),
      401,
      'invalid_credentials',
    );
  });

  test('a chosen password (--password-stdin, or given to POST /operators) need not be changed; a generated one (the CLI or the console API, create or reset) must', async () => {
    const chosen = await cli(
      [
        'operator',
        'create',
        '--email',
        'chosen@example.com',
        '--role',
        'owner',
        '--password-stdin',
      ],
      'a password of my own choosing\n',
    );
    const chosenClient = await ConsoleClient.signIn(
      p.console,
      'chosen@example.com',
      'a password of my own choosing',
    );
    assert.equal(
      expectStatus(await chosenClient.get('/session'), 200).operator.must_change_password,
      false,
    );
    expectStatus(await chosenClient.get('/projects'), 200);

    const byOwner = expectStatus(
      await owner.post('/operators', { email: 'made@example.com', role: 'owner' }),
      201,
    );
    assert.equal(byOwner.must_change_password, true);
    const withPassword = expectStatus(
      await owner.post('/operators', {
        email: 'given@example.com',
        role: 'owner',
        password: 'a password the owner gave',
      }),
      201,
    );
    assert.equal(withPassword.must_change_password, false);

    // A reset with a generated password: must be changed again; with one chosen on standard input, not.
    const reset = expectStatus(await owner.post(`/operators/${chosen.id}/reset-password`), 200);
    const afterReset = await ConsoleClient.signIn(p.console, 'chosen@example.com', reset.password);
    expectError(await afterReset.get('/projects'), 403, 'password_change_required');
    const cliReset = await cli(['operator', 'reset-password', chosen.id]);
    const afterCliReset = await ConsoleClient.signIn(
      p.console,
      'chosen@example.com',
      cliReset.password,
    );
    expectError(await afterCliReset.get('/projects'), 403, 'password_change_required');
    await cli(
      ['operator', 'reset-password', chosen.id, '--password-stdin'],
      'another password of my own\n',
    );
    const afterChosenReset = await ConsoleClient.signIn(
      p.console,
      'chosen@example.com',
      'another password of my own',
    );
    expectStatus(await afterChosenReset.get('/projects'), 200);
    const list = (await cli(['operator', 'list'])).operators as {
      email: string;
      must_change_password: boolean;
    }[];
    assert.deepEqual(
      list
        .filter((o) => o.email !== 'owner@example.com' && o.email !== 'first@example.com')
        .map((o) => [o.email, o.must_change_password]),
      [
        ['chosen@example.com', false],
        ['made@example.com', true],
        ['given@example.com', false],
      ],
    );
  });

  test('an API token of an operator who must change their password is refused too, until they have; signing out is allowed', async () => {
    const created = await cli([
      'operator',
      'create',
      '--email',
      'scripted@example.com',
      '--role',
      'owner',
    ]);
    const token = (
      await cli(['operator', 'token', 'create', '--operator', created.id, '--name', 'ci'])
    ).token as string;
    const script = new ConsoleClient(p.console).withToken(token);
    expectError(await script.get('/projects'), 403, 'password_change_required');
    assert.equal(
      expectStatus(await script.get('/session'), 200).operator.must_change_password,
      true,
    );

    const session = await ConsoleClient.signIn(p.console, 'scripted@example.com', created.password);
    assert.equal(
      (
        await session.put('/session/password', {
          current_password: created.password,
          new_password: 'scripted chosen password',
        })
      ).status,
      200,
    );
    expectStatus(await script.get('/projects'), 200);

    const other = await cli([
      'operator',
      'create',
      '--email',
      'leaving@example.com',
      '--role',
      'member',
    ]);
    const leaving = await ConsoleClient.signIn(p.console, 'leaving@example.com', other.password);
    assert.equal((await leaving.delete('/session')).status, 204);
    expectError(await leaving.get('/session'), 401, 'unauthenticated');
  });
});
