/**
 * `postern backup` and `postern restore` (issue 21): a backup taken while the server accepts
 * sends, restored into a new state directory and started there, holds every message
 * acknowledged before the backup began, each readable (the same bytes) and with its events;
 * restore refuses a state directory that is not empty, and a directory that is no backup.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { text } from 'node:stream/consumers';
import { openMessageMime, messageShow } from '../../src/operator/messages.js';
import { createProjectWithKeys, post, runCli, validMessage } from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';

// A backup that never ends (one restarted by every commit) fails here rather than hanging the suite.
test('a backup taken under load restores into a new directory that starts with every message acknowledged before it began, readable and with its events', { timeout: 180_000 }, async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-backup-src-');
  const keys = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'backup'));
  const configFile = path.join(stateDir, 'load.json');
  writeFileSync(configFile, JSON.stringify({ delivery: { enabled: false }, rate_limits: { send_per_key: 100_000, batch_per_key: 100_000, unauthenticated_per_ip: 100_000 } }));
  const server = await scope.spawn(stateDir, { POSTERN_CONFIG: configFile });

  // Senders that keep going until told to stop, before, during and after the backup.
  const acknowledged: string[] = [];
  let sending = true;
  const senders = Array.from({ length: 4 }, async () => {
    while (sending) {
      // Every fourth over spool.index_body_max_bytes: a spool file; the others kept in the index.
      const n = acknowledged.length;
      const res = await post(server.production, '/v1/send', { key: keys.liveKey, json: validMessage({ subject: `under load ${n}`, ...(n % 4 === 0 ? { text: 'x'.repeat(70_000) } : {}) }) });
      assert.equal(res.status, 202, res.text);
      acknowledged.push(res.body.id as string);
    }
  });
  while (acknowledged.length < 200) await new Promise((r) => setTimeout(r, 20));

  const before = [...acknowledged];
  const backupDir = path.join(scope.stateDir('postern-backup-dir-'), 'copy');
  const env = { POSTERN_STATE_DIR: stateDir };
  const backup = await runCli(['backup', '--to', backupDir, '--json'], env);
  const duringBackup = acknowledged.length - before.length;
  sending = false;
  await Promise.all(senders);
  assert.equal(backup.code, 0, backup.stdout + backup.stderr);
  assert.ok(duringBackup > 0, 'sends went on while the backup ran');
  assert.deepEqual(backup.json.missing, []);
  assert.ok(backup.json.messages >= before.length);
  assert.equal(backup.json.files + backup.json.bodies_in_index, backup.json.messages);
  assert.ok(backup.json.files > 0 && backup.json.bodies_in_index > 0, 'both kinds of message are in the backup');
  await server.stop();
  const originals = await withClosedIndex(stateDir, async (ctx) => new Map(await Promise.all(before.map(async (id) => [id, await text(await openMessageMime(ctx, id))] as const))));

  const restoredDir = path.join(scope.stateDir('postern-backup-dst-'), 'state');
  const restored = await runCli(['restore', '--from', backupDir, '--json'], { POSTERN_STATE_DIR: restoredDir });
  assert.equal(restored.code, 0, restored.stdout + restored.stderr);
  assert.deepEqual([restored.json.messages, restored.json.files], [backup.json.messages, backup.json.files]);

  const again = await scope.spawn(restoredDir);
  assert.equal((await fetch(`${again.production}/readyz`)).status, 200);
  await withClosedIndex(restoredDir, async (ctx) => {
    for (const id of before) {
      const shown = await messageShow(ctx, id);
      assert.equal(shown.status, 'queued', id);
      assert.deepEqual(shown.events.map((e) => e.type), ['mail.accepted'], `${id} has its events`);
      const original = originals.get(id)!;
      assert.ok(original.length > 0);
      assert.equal(await text(await openMessageMime(ctx, id)), original, `${id} reads the same bytes`);
    }
  });
  // The restored server accepts new mail too.
  assert.equal((await post(again.production, '/v1/send', { key: keys.liveKey, json: validMessage() })).status, 202);
});

test('restore refuses a state directory that is not empty and a directory that is no backup, and changes nothing', async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-restore-busy-');
  await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'already here'));
  const backupDir = path.join(scope.stateDir('postern-restore-bk-'), 'copy');
  const made = await runCli(['backup', '--to', backupDir, '--json'], { POSTERN_STATE_DIR: stateDir });
  assert.equal(made.code, 0, made.stderr);

  const busy = await runCli(['restore', '--from', backupDir, '--json'], { POSTERN_STATE_DIR: stateDir });
  assert.equal(busy.code, 1);
  assert.equal(busy.json.error.code, 'conflict');
  assert.match(busy.json.error.message, /is not empty: restore only into an empty one/);

  const notBackup = path.join(scope.stateDir('postern-restore-none-'), 'x');
  mkdirSync(notBackup);
  writeFileSync(path.join(notBackup, 'postern.db'), 'not a backup');
  const target = path.join(scope.stateDir('postern-restore-target-'), 'state');
  const refused = await runCli(['restore', '--from', notBackup, '--json'], { POSTERN_STATE_DIR: target });
  assert.equal(refused.code, 1);
  assert.equal(refused.json.error.code, 'invalid_argument');
  assert.match(refused.json.error.message, /is not a finished Postern backup/);

  const intoFull = await runCli(['backup', '--to', notBackup, '--json'], { POSTERN_STATE_DIR: stateDir });
  assert.equal(intoFull.code, 1);
  assert.match(intoFull.json.error.message, /is not empty: back up into a new or empty directory/);
});

test('with store.backend "postgres", backup and restore say to use the database\'s own tools, and touch nothing', async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-backup-pg-');
  const target = path.join(scope.stateDir('postern-backup-pg-to-'), 'copy');
  // Never connected to: the refusal comes first.
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_STORE_BACKEND: 'postgres', POSTERN_DATABASE_URL: 'postgres://postern@127.0.0.1:1/postern' };
  for (const args of [['backup', '--to', target], ['restore', '--from', target]]) {
    const r = await runCli([...args, '--json'], env);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.json.error.code, 'invalid_argument');
    assert.match(r.json.error.message, /every message is in the database: use pg_dump \/ pg_restore/);
  }
  assert.equal(existsSync(target), false);
});
