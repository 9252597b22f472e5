/**
 * No password, operator token, session id or API key (nor any other secret) appears in the
 * server's logs, the CLI's logs, or any console API answer after the one that created it: a
 * real `postern start` process logging everything (trace), driven over real HTTP.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConsoleClient, expectStatus } from '../support/console.js';
import { post, runCli, validMessage } from '../support/postern.js';
import { ProcessScope } from '../support/processes.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

describe('console secrets', () => {
  const scope = new ProcessScope();
  const secrets = new Map<string, string>();
  const cliStderr: string[] = [];
  let dir: string;
  let logFile: string;
  let base: string;
  let production: string;
  let stop: () => Promise<number | null>;
  let client: ConsoleClient;
  let projectId: string;
  let receiver: WebhookReceiver;

  const remember = (what: string, value: string) => {
    assert.ok(value.length >= 8, `${what} is a real secret`);
    secrets.set(what, value);
  };
  const cli = async (args: string[], input?: string) => {
    const r = await runCli(
      [...args, '--json'],
      {
        POSTERN_STATE_DIR: dir,
        POSTERN_LOG_LEVEL: 'trace',
        POSTERN_CONFIG: path.join(dir, 'test-config.json'),
      },
      input,
    );
    assert.equal(r.code, 0, r.stdout + r.stderr);
    cliStderr.push(r.stderr);
    return r.json;
  };

  before(async () => {
    receiver = await WebhookReceiver.start();
    dir = scope.stateDir('postern-secrets-');
    logFile = path.join(dir, 'server.log');
    // The server and the CLI share one config: delivery off, private webhook targets allowed (the receiver).
    writeFileSync(
      path.join(dir, 'test-config.json'),
      JSON.stringify({ delivery: { enabled: false }, webhooks: { allow_private_targets: true } }),
    );
    const server = await scope.spawn(
      dir,
      { POSTERN_LOG_LEVEL: 'trace', POSTERN_CONFIG: path.join(dir, 'test-config.json') },
      [],
      { logFile },
    );
    stop = () => server.stop();
    base = server.listeners.find((l) => l.protocol === 'console')!.url;
    production = server.production;
    const owner = await cli([
      'operator',
      'create',
      '--email',
      'owner@example.com',
      '--role',
      'owner',
    ]);
    remember('generated password', owner.password);
    remember('chosen password', 'a chosen password from stdin');
    await cli(
      [
        'operator',
        'create',
        '--email',
        'chosen@example.com',
        '--role',
        'owner',
        '--password-stdin',
      ],
      'a chosen password from stdin\n',
    );
    remember('wrong password tried', 'Wrong-Password-Tried-Once');
    assert.equal(
      (
        await new ConsoleClient(base).post('/session', {
          email: 'owner@example.com',
          password: 'Wrong-Password-Tried-Once',
        })
      ).status,
      401,
    );

    client = await ConsoleClient.signIn(base, 'owner@example.com', owner.password);
    // A generated password is changed before anything else.
    remember('changed password', 'the owner changed password');
    assert.equal(
      (
        await client.put('/session/password', {
          current_password: owner.password,
          new_password: 'the owner changed password',
        })
      ).status,
      200,
    );
    remember('session id', client.cookie!.split('=')[1]);
    const token = expectStatus(await client.post('/tokens', { name: 'script' }), 201).token;
    remember('operator token', token);
    const script = client.withToken(token);
    projectId = expectStatus(
      await script.post('/projects', { name: 'secrets', plan: 'pro' }),
      201,
    ).id;
    const key = expectStatus(
      await script.post(`/projects/${projectId}/keys`, { mode: 'live' }),
      201,
    ).key;
    remember('API key', key);
    const rotated = expectStatus(
      await script.post(
        `/keys/${expectStatus(await script.get(`/projects/${projectId}/keys`), 200).keys[0].id}/rotate`,
        { grace_seconds: 60 },
      ),
      201,
    );
    remember('rotated API key', rotated.key.key);
    const provider = expectStatus(
      await script.post(`/projects/${projectId}/providers`, {
        slug: 'smtp',
        host: '127.0.0.1',
        port: 9,
        tls: 'none',
        user: 'relay',
        pass: 'relay-password-secret',
        webhook_secret: 'feedback-secret-value',
      }),
      201,
    );
    remember('provider password', 'relay-password-secret');
    remember('provider webhook secret', 'feedback-secret-value');
    await script.post(`/providers/${provider.id}/check`);
    const apiAccount = await script.post(`/projects/${projectId}/providers`, {
      slug: 'provider-d-api',
      endpoint: receiver.url('/resend'),
      api_key: 're_provider_api_key_secret',
    });
    remember('provider API key', 're_provider_api_key_secret');
    await script.post(`/providers/${apiAccount.body.id}/check`);
    const hook = expectStatus(
      await script.post(`/projects/${projectId}/webhooks`, { url: receiver.url('/hook') }),
      201,
    );
    remember('webhook secret', hook.secret);
    remember(
      'rotated webhook secret',
      expectStatus(await script.post(`/webhooks/${hook.id}/rotate-secret`), 200).secret,
    );
    await script.post(`/webhooks/${hook.id}/test`);
    const pem = generateKeyPairSync('ed25519').privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    remember('DKIM private key', pem.split('\n')[1]);
    expectStatus(
      await script.post(`/projects/${projectId}/dkim`, {
        domain: 'example.com',
        selector: 's1',
        private_key: pem,
      }),
      201,
    );
    const member = expectStatus(
      await script.post('/operators', {
        email: 'dev@example.com',
        role: 'member',
        projects: [projectId],
      }),
      201,
    );
    remember('member password', member.password);
    remember(
      'reset password',
      expectStatus(await script.post(`/operators/${member.id}/reset-password`), 200).password,
    );
    const cliToken = await cli([
      'operator',
      'token',
      'create',
      '--operator',
      owner.id,
      '--name',
      'cli',
    ]);
    remember('CLI operator token', cliToken.token);
    const reset = await cli(['operator', 'reset-password', member.id]);
    remember('CLI reset password', reset.password);
    assert.equal(
      (await post(production, '/v1/send', { key: rotated.key.key, json: validMessage() })).status,
      202,
    );
    assert.equal((await post(production, '/v1/send', { key, json: validMessage() })).status, 202);
  });
  after(async () => {
    await receiver?.close();
    await scope.cleanup();
  });

  test('no console API answer after the one that created it holds a secret', async () => {
    const script = client.withToken(secrets.get('operator token')!);
    const keyId = expectStatus(await script.get(`/projects/${projectId}/keys`), 200).keys[0].id;
    const answers = await Promise.all(
      [
        '/session',
        '/tokens',
        '/operators',
        '/projects',
        `/projects/${projectId}`,
        `/projects/${projectId}/keys`,
        `/projects/${projectId}/providers`,
        `/projects/${projectId}/webhooks`,
        `/projects/${projectId}/dkim`,
        '/audit?limit=500',
        '/overview',
        '/messages',
      ].map(async (p) => [p, (await client.get(p)).text] as const),
    );
    answers.push([
      '/openapi.json',
      await (await fetch(`${base}/console/api/v1/openapi.json`)).text(),
    ]);
    answers.push([`key ${keyId} revoked`, (await script.post(`/keys/${keyId}/revoke`)).text]);
    for (const [where, text] of answers) {
      for (const [what, value] of secrets)
        assert.ok(!text.includes(value), `${what} appears in ${where}`);
    }
  });

  test('neither the server’s log (at trace level) nor the CLI’s holds a secret, while the log does record the requests', async () => {
    assert.equal(await stop(), 0);
    const log = readFileSync(logFile, 'utf8');
    assert.match(log, /"msg":"console request"/);
    assert.match(log, /"path":"\/console\/api\/v1\/session"/);
    for (const [what, value] of secrets) {
      assert.ok(!log.includes(value), `${what} appears in the server log`);
      for (const stderr of cliStderr)
        assert.ok(!stderr.includes(value), `${what} appears in the CLI's log`);
    }
  });
});
