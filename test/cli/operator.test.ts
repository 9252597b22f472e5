/**
 * The operator CLI's console-era commands, as a real child process on a real state directory:
 * operators and their tokens, the audit log, and the operations the console added that the CLI
 * now has too (message retry / delete / bulk, key rotate, provider set / check, webhook
 * attempts, suppression export, overview).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { listKeys } from '../../src/operator/keys.js';
import { listProviders } from '../../src/operator/providers.js';
import { suppress } from '../../src/operator/suppressions.js';
import { sql } from '../../src/store/db.js';
import { getMessage } from '../../src/store/messages.js';
import { ConsoleClient, expectStatus } from '../support/console.js';
import {
  createProjectWithKeys,
  post,
  runCli,
  startTestPostern,
  type TestPostern,
  tempStateDir,
  validMessage,
} from '../support/postern.js';

describe('postern operator', () => {
  let p: TestPostern;
  let env: Record<string, string>;
  const cli = (args: string[], input?: string) => runCli([...args, '--json'], env, input);
  const ok = async (args: string[], input?: string) => {
    const r = await cli(args, input);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    return r.json;
  };
  const refused = async (args: string[], code: string, input?: string) => {
    const r = await cli(args, input);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.json.error.code, code, r.stdout);
    return r.json.error;
  };

  before(async () => {
    p = await startTestPostern({ stateDir: tempStateDir(), console: true });
    env = { POSTERN_STATE_DIR: p.stateDir };
  });
  after(async () => p?.close());

  test('operator create --json prints exactly {"id","email","password"}: a one-time password that signs in', async () => {
    const created = await ok([
      'operator',
      'create',
      '--email',
      'first@example.com',
      '--role',
      'owner',
    ]);
    assert.deepEqual(Object.keys(created), ['id', 'email', 'password']);
    assert.match(created.id, /^op\.[0-9a-z]{16}$/);
    assert.equal(created.email, 'first@example.com');
    assert.match(created.password, /^[A-Za-z0-9]{20}$/);
    await ConsoleClient.signIn(p.console, 'first@example.com', created.password);
  });

  test('--password-stdin takes the password from standard input and prints none; a short one is refused', async () => {
    const created = await ok(
      ['operator', 'create', '--email', 'stdin@example.com', '--role', 'owner', '--password-stdin'],
      'my own long password\n',
    );
    assert.deepEqual(Object.keys(created), ['id', 'email']);
    await ConsoleClient.signIn(p.console, 'stdin@example.com', 'my own long password');
    const short = await refused(
      ['operator', 'create', '--email', 'short@example.com', '--role', 'owner', '--password-stdin'],
      'invalid_argument',
      'short\n',
    );
    assert.match(short.message, /at least 12 characters/);
  });

  test('members get projects with --project (repeatable); bad roles, unknown projects and taken emails are refused', async () => {
    const a = await ok(['project', 'create', '--name', 'one']);
    const b = await ok(['project', 'create', '--name', 'two']);
    const member = await ok([
      'operator',
      'create',
      '--email',
      'dev@example.com',
      '--role',
      'member',
      '--project',
      a.id,
      '--project',
      b.id,
    ]);
    const listed = (await ok(['operator', 'list'])).operators.find((o: any) => o.id === member.id);
    assert.deepEqual(listed.projects, [a.id, b.id].sort());
    assert.deepEqual(Object.keys(listed).sort(), [
      'created_at',
      'email',
      'id',
      'must_change_password',
      'password_changed_at',
      'projects',
      'role',
    ]);
    await refused(
      ['operator', 'create', '--email', 'x@example.com', '--role', 'admin'],
      'invalid_argument',
    );
    await refused(
      [
        'operator',
        'create',
        '--email',
        'y@example.com',
        '--role',
        'member',
        '--project',
        'p.nosuchproject00000000',
      ],
      'not_found',
    );
    await refused(
      ['operator', 'create', '--email', 'Dev@Example.com', '--role', 'member'],
      'conflict',
    );
    const updated = await ok(['operator', 'update', member.id, '--project', b.id]);
    assert.deepEqual(updated.projects, [b.id]);
  });

  test('reset-password prints a new one-time password, ends the operator’s sessions and revokes their tokens, and says how many; remove ends everything; the last owner stays', async () => {
    const created = await ok([
      'operator',
      'create',
      '--email',
      'reset@example.com',
      '--role',
      'owner',
    ]);
    const session = await ConsoleClient.signIn(p.console, 'reset@example.com', created.password);
    const made = await ok([
      'operator',
      'token',
      'create',
      '--operator',
      created.id,
      '--name',
      'ci',
    ]);
    const script = new ConsoleClient(p.console).withToken(made.token);
    expectStatus(await script.get('/session'), 200);
    const reset = await ok(['operator', 'reset-password', created.id]);
    assert.equal((await session.get('/session')).status, 401);
    assert.equal((await script.get('/session')).status, 401);
    assert.deepEqual(Object.keys(reset), [
      'id',
      'email',
      'password',
      'sessions_ended',
      'tokens_revoked',
    ]);
    assert.deepEqual([reset.sessions_ended, reset.tokens_revoked], [1, 1]);
    assert.notEqual(reset.password, created.password);
    assert.deepEqual(
      (await ok(['operator', 'token', 'list', '--operator', created.id])).tokens.map(
        (t: any) => t.state,
      ),
      ['revoked'],
    );
    // --keep-tokens leaves them working; without --json the counts are printed as lines.
    const kept = new ConsoleClient(p.console).withToken(
      (await ok(['operator', 'token', 'create', '--operator', created.id, '--name', 'kept'])).token,
    );
    const said = await runCli(
      ['operator', 'reset-password', created.id, '--keep-tokens', '--password-stdin'],
      env,
      'a chosen long password\n',
    );
    assert.equal(said.code, 0, said.stderr);
    assert.match(said.stdout, /^sessions_ended: 0$/m);
    assert.match(said.stdout, /^tokens_revoked: 0$/m);
    expectStatus(await kept.get('/session'), 200);
    const again = await ConsoleClient.signIn(
      p.console,
      'reset@example.com',
      'a chosen long password',
    );
    assert.deepEqual(await ok(['operator', 'remove', created.id]), {
      id: created.id,
      removed: true,
    });
    assert.equal((await again.get('/session')).status, 401);
    await refused(['operator', 'remove', created.id], 'not_found');
    const dir = tempStateDir();
    const alone = await runCli(
      ['operator', 'create', '--email', 'alone@example.com', '--role', 'owner', '--json'],
      { POSTERN_STATE_DIR: dir },
    );
    const last = await runCli(['operator', 'remove', alone.json.id, '--json'], {
      POSTERN_STATE_DIR: dir,
    });
    assert.deepEqual([last.code, last.json.error.code], [1, 'conflict']);
  });

  test('operator token create prints the token once; list shows hints; revoke stops it', async () => {
    const owner = await ok([
      'operator',
      'create',
      '--email',
      'tokens@example.com',
      '--role',
      'owner',
    ]);
    const made = await ok(['operator', 'token', 'create', '--operator', owner.id, '--name', 'ci']);
    assert.match(made.token, /^pso_[A-Za-z0-9]{40}$/);
    const listed = await ok(['operator', 'token', 'list', '--operator', owner.id]);
    assert.ok(!JSON.stringify(listed).includes(made.token));
    assert.deepEqual(
      listed.tokens.map((t: any) => [t.id, t.name, t.state]),
      [[made.id, 'ci', 'active']],
    );
    const client = new ConsoleClient(p.console).withToken(made.token);
    expectStatus(await client.get('/session'), 200);
    assert.equal((await ok(['operator', 'token', 'revoke', made.id])).state, 'revoked');
    assert.equal((await client.get('/session')).status, 401);
  });

  test('the audit log records CLI actions as cli, newest first, and filters by action', async () => {
    const log = await ok(['audit', 'list', '--limit', '3']);
    assert.equal(log.entries.length, 3);
    assert.ok(log.entries.every((e: any) => e.actor === 'cli' && e.client_ip === null));
    assert.equal(log.entries[0].action, 'operator_token.revoke');
    const creates = await ok(['audit', 'list', '--action', 'operator.create', '--limit', '500']);
    assert.ok(creates.entries.length >= 5);
    assert.ok(creates.entries.every((e: any) => e.action === 'operator.create'));
    assert.ok(
      creates.entries.every((e: any) => !('password' in (e.details ?? {}))),
      JSON.stringify(creates),
    );
  });

  test('message retry, delete and bulk; key rotate; provider set and check; webhook attempts; suppression export; overview show', async () => {
    // Set up in-process (each CLI run costs a process start); the commands under test run as the CLI.
    const { project, liveKey, testKey } = await createProjectWithKeys(p.ctx, 'ops');
    const live = {
      id: (await listKeys(p.ctx, project.id)).keys.find((k) => k.mode === 'live')!.id,
      key: liveKey,
    };
    const test = { key: testKey };
    const queued = (await post(p.production, '/v1/send', { key: live.key, json: validMessage() }))
      .body.id;
    sql(p.db, 'UPDATE messages SET next_attempt_at = ? WHERE id = ?').run(
      Date.now() + 3600_000,
      queued,
    );
    assert.equal((await ok(['message', 'retry', queued])).status, 'queued');
    // Order, not duration: made due before the command answered (it was an hour away).
    const answeredAt = Date.now();
    assert.ok((await getMessage(p.ctx.store, queued))!.next_attempt_at! <= answeredAt);
    const captured = (await post(p.sandbox, '/v1/send', { key: test.key, json: validMessage() }))
      .body.id;
    const bulk = await ok(['message', 'bulk', '--action', 'release', '--project', project.id]);
    assert.deepEqual(bulk, { action: 'release', matched: 1, changed: 1, skipped: 0, not_found: 0 });
    const another = (await post(p.sandbox, '/v1/send', { key: test.key, json: validMessage() }))
      .body.id;
    assert.deepEqual(await ok(['message', 'delete', another]), { id: another, deleted: true });
    await refused(['message', 'delete', captured], 'conflict');

    const rotated = await ok(['key', 'rotate', live.id, '--grace-seconds', '0']);
    assert.equal(rotated.previous.state, 'expired');
    const accounts = (await listProviders(p.ctx, project.id)).providers;
    const set = await ok([
      'provider',
      'set',
      accounts[0].id,
      '--priority',
      '7',
      '--free-quota',
      '100',
    ]);
    assert.deepEqual([set.priority, set.free_quota], [7, 100]);
    assert.equal(
      (await ok(['provider', 'set', accounts[0].id, '--free-quota', 'none'])).free_quota,
      null,
    );
    const checked = await ok(['provider', 'check', accounts[0].id]);
    assert.deepEqual([checked.checkable, checked.ok, checked.failed_at], [true, false, 'connect']);

    await suppress(p.ctx, project.id, 'b@example.org');
    await suppress(p.ctx, project.id, 'a@example.org', 'complaint');
    const csv = await runCli(['suppression', 'export', '--project', project.id], env);
    assert.equal(csv.code, 0, csv.stderr);
    assert.match(
      csv.stdout,
      /^email,reason,created_at\r\na@example\.org,complaint,\S+\r\nb@example\.org,manual,\S+\r\n$/,
    );

    const overview = await ok(['overview', 'show', '--project', project.id]);
    assert.equal(overview.hourly.length, 24);
    // Three accepted; the deleted one's events went with it.
    assert.equal(
      overview.hourly.reduce((n: number, h: any) => n + h.counts.accepted, 0),
      2,
    );
    assert.equal(overview.providers.length >= 1, true);
    await refused(['webhook', 'attempts', 'wh.nosuchwebhook00000000'], 'not_found');
  });
});
