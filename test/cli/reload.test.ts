/**
 * `kill -HUP` (systemctl reload, issue 21): the running server reads its config file again,
 * applies plans, limits and the log level at once, says what changed and what needs a restart,
 * and keeps the running config, and its TLS certificate, when the new file does not validate.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { generate } from 'selfsigned';
import { jsonLogLines } from '../support/logLines.js';
import { plan, withPlans } from '../support/plans.js';
import { createProjectWithKeys, post, runCli, validMessage } from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';
import { RawSmtp } from '../support/rawSmtp.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';

interface LogLine {
  level: string;
  msg: string;
  thread?: string;
  changed?: string[];
  restart_needed?: string[];
}

test('SIGHUP applies new plans and the log level at once, names what needs a restart, and keeps the running config when the file is invalid', async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-reload-');
  const configFile = path.join(stateDir, 'config.json');
  const write = (monthly: number, extra: Record<string, unknown> = {}) =>
    writeFileSync(
      configFile,
      JSON.stringify({
        delivery: { enabled: false },
        log: { level: 'info' },
        ...withPlans({ free: plan({ monthly_messages: monthly }) }),
        ...extra,
      }),
    );
  write(1);
  const keys = await withClosedIndex(stateDir, (ctx) =>
    createProjectWithKeys(ctx, 'reload', 'free'),
  );
  // POSTERN_LOG_LEVEL empty: the config's log.level rules.
  const server = await scope.spawn(stateDir, { POSTERN_CONFIG: configFile, POSTERN_LOG_LEVEL: '' });
  const lines = () => jsonLogLines<LogLine>(server.stderr());
  const send = () =>
    post(server.production, '/v1/send', { key: keys.liveKey, json: validMessage() });

  assert.equal((await send()).status, 202);
  const spent = await send();
  assert.equal(spent.status, 402);
  assert.equal(spent.body.error.code, 'monthly_quota_exceeded');

  // A bigger plan and the debug level, live; and an SMTP limit, which needs a restart.
  write(100, { log: { level: 'debug' }, smtp: { max_clients: 50 } });
  server.child.kill('SIGHUP');
  const reloaded = await waitFor(
    () => lines().find((l) => l.msg.startsWith('config reloaded')),
    HANG_GUARD_MS,
    'the reload line',
  );
  assert.deepEqual(reloaded.changed?.sort(), ['log', 'plans']);
  assert.deepEqual(reloaded.restart_needed, ['smtp']);
  assert.equal(reloaded.level, 'warn');
  const upToReload = lines();
  assert.ok(
    !upToReload.slice(0, upToReload.indexOf(reloaded)).some((l) => l.msg === 'message accepted'),
    'no debug line at info',
  );
  assert.equal((await send()).status, 202, 'the new plan applies at once');
  // Lines are written in 4 KiB blocks: a few more requests push the debug line out.
  await waitFor(
    async () => {
      assert.equal((await send()).status, 202);
      return lines().some((l) => l.msg === 'message accepted');
    },
    10_000,
    'a debug line after the reload',
  );

  // An invalid file: refused whole, the running config kept.
  writeFileSync(configFile, JSON.stringify({ plans: { free: { monthly_messages: -1 } } }));
  server.child.kill('SIGHUP');
  await waitFor(
    () => lines().some((l) => l.msg.startsWith('config reload refused')),
    HANG_GUARD_MS,
    'the refusal line',
  );
  assert.equal((await send()).status, 202, 'still the reloaded plan');
  assert.equal(server.child.exitCode, null, 'still running');
  assert.equal(await server.stop(), 0);
});

test("SIGHUP's new log level reaches the webhook dispatcher's thread too", async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-reload-webhooks-');
  const configFile = path.join(stateDir, 'config.json');
  // Every attempt fails at once (nothing listens on the discard port): each is a debug line on the dispatcher's thread.
  const write = (level: string) =>
    writeFileSync(
      configFile,
      JSON.stringify({
        delivery: { enabled: false },
        log: { level },
        webhooks: { allow_private_targets: true, poll_interval_ms: 20 },
      }),
    );
  write('info');
  const keys = await withClosedIndex(stateDir, (ctx) =>
    createProjectWithKeys(ctx, 'reload webhooks', 'pro'),
  );
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configFile };
  const added = await runCli(
    ['webhook', 'add', '--project', keys.project.id, '--url', 'http://127.0.0.1:9/hook'],
    env,
  );
  assert.equal(added.code, 0, added.stderr);
  const server = await scope.spawn(stateDir, { POSTERN_CONFIG: configFile, POSTERN_LOG_LEVEL: '' });
  const lines = () => jsonLogLines<LogLine>(server.stderr());
  const send = async () =>
    assert.equal(
      (await post(server.production, '/v1/send', { key: keys.liveKey, json: validMessage() }))
        .status,
      202,
    );
  const failedAttempt = (l: LogLine) =>
    l.msg === 'webhook attempt failed' && l.thread === 'webhooks';

  // At info: attempts fail (counted in the index), and say nothing.
  for (let i = 0; i < 20; i++) await send();
  const attempted = () => {
    const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
    try {
      return db
        .prepare('SELECT COALESCE(SUM(attempts), 0) FROM webhook_deliveries')
        .pluck()
        .get() as number;
    } finally {
      db.close();
    }
  };
  await waitFor(() => attempted() >= 20, HANG_GUARD_MS, 'failed attempts at info');

  write('debug');
  server.child.kill('SIGHUP');
  await waitFor(
    () => lines().some((l) => l.msg.startsWith('config reloaded')),
    HANG_GUARD_MS,
    'the reload line',
  );
  // The thread's lines are written in 4 KiB blocks too: more failing attempts push them out.
  await waitFor(
    async () => {
      await send();
      return lines().some(failedAttempt);
    },
    HANG_GUARD_MS,
    "a debug line from the dispatcher's thread after the reload",
  );
  const all = lines();
  const reloadAt = all.findIndex((l) => l.msg.startsWith('config reloaded'));
  assert.ok(!all.slice(0, reloadAt).some(failedAttempt), 'no debug line at info');
  assert.equal(await server.stop(), 0);
});

test('a SIGHUP that changes only the log level keeps the rate windows: a spent key stays refused', async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-reload-windows-');
  const configFile = path.join(stateDir, 'config.json');
  const write = (level: string) =>
    writeFileSync(
      configFile,
      JSON.stringify({
        delivery: { enabled: false },
        log: { level },
        rate_limits: { send_per_key: 2, window_seconds: 600 },
      }),
    );
  write('info');
  const keys = await withClosedIndex(stateDir, (ctx) =>
    createProjectWithKeys(ctx, 'reload windows', 'pro'),
  );
  const server = await scope.spawn(stateDir, { POSTERN_CONFIG: configFile, POSTERN_LOG_LEVEL: '' });
  const lines = () => jsonLogLines<LogLine>(server.stderr());
  const send = () =>
    post(server.production, '/v1/send', { key: keys.liveKey, json: validMessage() });
  assert.equal((await send()).status, 202);
  assert.equal((await send()).status, 202);
  const spent = await send();
  assert.equal(spent.status, 429);
  assert.equal(spent.body.error.code, 'rate_limited');

  write('debug');
  server.child.kill('SIGHUP');
  const reloaded = await waitFor(
    () => lines().find((l) => l.msg.startsWith('config reloaded')),
    HANG_GUARD_MS,
    'the reload line',
  );
  assert.deepEqual(reloaded.changed, ['log']);
  const after = await send();
  assert.equal(after.status, 429, 'the window kept its two sends');
  assert.equal(after.body.error.code, 'rate_limited');
  assert.equal(await server.stop(), 0);
});

test('a SIGHUP whose config file does not validate reloads nothing, the TLS certificate included, and says so: no "TLS certificate reloaded" line', async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-reload-tls-');
  const configFile = path.join(stateDir, 'config.json');
  const valid = JSON.stringify({ delivery: { enabled: false }, log: { level: 'info' } });
  writeFileSync(configFile, valid);
  const server = await scope.spawn(stateDir, { POSTERN_CONFIG: configFile, POSTERN_LOG_LEVEL: '' });
  const lines = () => jsonLogLines<LogLine>(server.stderr());
  const port = server.listeners.find(
    (l) => l.protocol === 'smtp' && l.url.startsWith('smtps://'),
  )!.port;
  const served = async () => {
    const { client } = await RawSmtp.connect(port, { implicit: true });
    const fingerprint = client.fingerprint();
    await client.quit();
    return fingerprint;
  };
  const first = await served();

  // A new pair where the server reads its certificate, and a config file that does not validate.
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keySize: 2048,
    algorithm: 'sha256',
  });
  writeFileSync(path.join(stateDir, 'certs', 'postern.crt'), pems.cert);
  writeFileSync(path.join(stateDir, 'certs', 'postern.key'), pems.private);
  writeFileSync(configFile, JSON.stringify({ plans: { free: { monthly_messages: -1 } } }));
  server.child.kill('SIGHUP');
  const refused = await waitFor(
    () => lines().find((l) => l.msg.startsWith('config reload refused')),
    5000,
    'the refusal line',
  );
  assert.equal(refused.level, 'error');
  assert.equal(await served(), first, 'the running certificate is kept');

  // The same SIGHUP with the file fixed: the new pair is served, and said so.
  writeFileSync(configFile, valid);
  server.child.kill('SIGHUP');
  await waitFor(
    () => lines().find((l) => l.msg.startsWith('config reloaded')),
    5000,
    'the reload line',
  );
  assert.equal(await served(), new X509Certificate(pems.cert).fingerprint256);
  // Stopped, the log is whole (lines are written in 4 KiB blocks).
  assert.equal(await server.stop(), 0);
  const said = lines()
    .map((l) => l.msg)
    .filter((msg) => msg.startsWith('config reload') || msg.startsWith('TLS'));
  // It said "TLS certificate reloaded" after the refusal too, though nothing of the reload applied.
  assert.deepEqual(said, [refused.msg, 'config reloaded', 'TLS certificate reloaded']);
});
