/**
 * `postern backup` and `postern restore` (issue 21): a backup taken while the server accepts
 * sends, restored into a new state directory and started there, holds every message
 * acknowledged before the backup began, each readable (the same bytes) and with its events;
 * restore refuses a state directory that is not empty, and a directory that is no backup.
 */
import assert from 'node:assert/strict';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { test } from 'node:test';
import { messageShow, openMessageMime } from '../../src/operator/messages.js';
import { createProjectWithKeys, post, runCli, validMessage } from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';

// A backup that never ends (one restarted by every commit) fails here rather than hanging the suite.
test('a backup taken under load restores into a new directory that starts with every message acknowledged before it began, readable and with its events', {
  timeout: 180_000,
}, async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-backup-src-');
  const keys = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'backup'));
  const configFile = path.join(stateDir, 'load.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      delivery: { enabled: false },
      rate_limits: {
        send_per_key: 100_000,
        batch_per_key: 100_000,
        unauthenticated_per_ip: 100_000,
      },
    }),
  );
  const server = await scope.spawn(stateDir, { POSTERN_CONFIG: configFile });

  // Senders that keep going until told to stop, before, during and after the backup.
  const acknowledged: string[] = [];
  let sending = true;
  const senders = Array.from({ length: 4 }, async () => {
    while (sending) {
      // Every fourth over spool.index_body_max_bytes: a spool file; the others kept in the index.
      const n = acknowledged.length;
      const res = await post(server.production, '/v1/send', {
        key: keys.liveKey,
        json: validMessage({
          subject: `under load ${n}`,
          ...(n % 4 === 0 ? { text: 'x'.repeat(70_000) } : {}),
        }),
      });
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
  assert.ok(
    backup.json.files > 0 && backup.json.bodies_in_index > 0,
    'both kinds of message are in the backup',
  );
  await server.stop();
  const originals = await withClosedIndex(
    stateDir,
    async (ctx) =>
      new Map(
        await Promise.all(
          before.map(async (id) => [id, await text(await openMessageMime(ctx, id))] as const),
        ),
      ),
  );

  const restoredDir = path.join(scope.stateDir('postern-backup-dst-'), 'state');
  const restored = await runCli(['restore', '--from', backupDir, '--json'], {
    POSTERN_STATE_DIR: restoredDir,
  });
  assert.equal(restored.code, 0, restored.stdout + restored.stderr);
  assert.deepEqual(
    [restored.json.messages, restored.json.files],
    [backup.json.messages, backup.json.files],
  );

  const again = await scope.spawn(restoredDir);
  assert.equal((await fetch(`${again.production}/readyz`)).status, 200);
  await withClosedIndex(restoredDir, async (ctx) => {
    for (const id of before) {
      const shown = await messageShow(ctx, id);
      assert.equal(shown.status, 'queued', id);
      assert.deepEqual(
        shown.events.map((e) => e.type),
        ['mail.accepted'],
        `${id} has its events`,
      );
      const original = originals.get(id)!;
      assert.ok(original.length > 0);
      assert.equal(
        await text(await openMessageMime(ctx, id)),
        original,
        `${id} reads the same bytes`,
      );
    }
  });
  // The restored server accepts new mail too.
  assert.equal(
    (await post(again.production, '/v1/send', { key: keys.liveKey, json: validMessage() })).status,
    202,
  );
});

test('restore refuses a state directory that is not empty and a directory that is no backup, and changes nothing', async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-restore-busy-');
  await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'already here'));
  const backupDir = path.join(scope.stateDir('postern-restore-bk-'), 'copy');
  const made = await runCli(['backup', '--to', backupDir, '--json'], {
    POSTERN_STATE_DIR: stateDir,
  });
  assert.equal(made.code, 0, made.stderr);

  const busy = await runCli(['restore', '--from', backupDir, '--json'], {
    POSTERN_STATE_DIR: stateDir,
  });
  assert.equal(busy.code, 1);
  assert.equal(busy.json.error.code, 'conflict');
  assert.match(busy.json.error.message, /is not empty: restore only into an empty one/);

  const notBackup = path.join(scope.stateDir('postern-restore-none-'), 'x');
  mkdirSync(notBackup);
  writeFileSync(path.join(notBackup, 'postern.db'), 'not a backup');
  const target = path.join(scope.stateDir('postern-restore-target-'), 'state');
  const refused = await runCli(['restore', '--from', notBackup, '--json'], {
    POSTERN_STATE_DIR: target,
  });
  assert.equal(refused.code, 1);
  assert.equal(refused.json.error.code, 'invalid_argument');
  assert.match(refused.json.error.message, /is not a finished Postern backup/);

  const intoFull = await runCli(['backup', '--to', notBackup, '--json'], {
    POSTERN_STATE_DIR: stateDir,
  });
  assert.equal(intoFull.code, 1);
  assert.match(intoFull.json.error.message, /is not empty: back up into a new or empty directory/);
});

test('with store.backend "postgres", backup and restore say to use the database\'s own tools, and touch nothing', async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-backup-pg-');
  const target = path.join(scope.stateDir('postern-backup-pg-to-'), 'copy');
  // Never connected to: the refusal comes first.
  const env = {
    POSTERN_STATE_DIR: stateDir,
    POSTERN_STORE_BACKEND: 'postgres',
    POSTERN_DATABASE_URL: 'postgres://postern@127.0.0.1:1/postern',
  };
  for (const args of [
    ['backup', '--to', target],
    ['restore', '--from', target],
  ]) {
    const r = await runCli([...args, '--json'], env);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.json.error.code, 'invalid_argument');
    assert.match(
      r.json.error.message,
      /every message is in the database: use pg_dump \/ pg_restore/,
    );
  }
  assert.equal(existsSync(target), false);
});

/** Every spool file of a backup (or state directory), relative to it. */
function spoolFilesIn(dir: string): string[] {
  return readdirSync(path.join(dir, 'spool'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.eml'))
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

// Issue 32, item 10 and 11: on today's main each of these restored (rc 0) a backup that did not
// hold what backup.json said, and a restore that failed halfway left files behind that refused the retry.
test('restore checks every file and count against backup.json: a replaced, a deleted or an altered file, a changed count, an unverifiable old format are refused, change nothing, and the retry after the backup is fixed succeeds', {
  timeout: 180_000,
}, async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-verify-src-');
  const keys = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'verify'));
  const server = await scope.spawn(stateDir);
  for (let i = 0; i < 5; i++) {
    // Three over spool.index_body_max_bytes (spool files), two kept in the index.
    const res = await post(server.production, '/v1/send', {
      key: keys.liveKey,
      json: validMessage({
        subject: `verify ${i}`,
        ...(i < 3 ? { text: `${i}`.repeat(104_000) } : {}),
      }),
    });
    assert.equal(res.status, 202, res.text);
  }
  await server.stop();
  const backupDir = path.join(scope.stateDir('postern-verify-bk-'), 'copy');
  const made = await runCli(['backup', '--to', backupDir, '--json'], {
    POSTERN_STATE_DIR: stateDir,
  });
  assert.equal(made.code, 0, made.stdout + made.stderr);
  assert.deepEqual([made.json.messages, made.json.files, made.json.bodies_in_index], [5, 3, 2]);
  const [eml, otherEml] = spoolFilesIn(backupDir);
  const manifestFile = path.join(backupDir, 'backup.json');
  const manifest = readFileSync(manifestFile, 'utf8');

  const cases: { name: string; damage: () => void; repair: () => void; refused: RegExp[] }[] = [
    {
      name: 'a replaced .eml (50 bytes where the index says more)',
      damage: () => writeFileSync(path.join(backupDir, eml), 'x'.repeat(50)),
      repair: () => copyFileSync(path.join(stateDir, eml), path.join(backupDir, eml)),
      refused: [new RegExp(escapeRegExp(eml)), /is 50 bytes/, /backup\.json/],
    },
    {
      name: 'an .eml altered in place (same size, other bytes)',
      damage: () => {
        const bytes = readFileSync(path.join(backupDir, otherEml));
        bytes[bytes.length - 10] ^= 1;
        writeFileSync(path.join(backupDir, otherEml), bytes);
      },
      repair: () => copyFileSync(path.join(stateDir, otherEml), path.join(backupDir, otherEml)),
      refused: [new RegExp(escapeRegExp(otherEml)), /SHA-256/],
    },
    {
      name: 'a deleted .eml',
      damage: () => rmSync(path.join(backupDir, eml)),
      repair: () => copyFileSync(path.join(stateDir, eml), path.join(backupDir, eml)),
      refused: [new RegExp(escapeRegExp(eml)), /not in the backup/],
    },
    {
      name: 'a changed count in backup.json',
      damage: () => writeFileSync(manifestFile, manifest.replace('"messages": 5', '"messages": 6')),
      repair: () => writeFileSync(manifestFile, manifest),
      refused: [/backup\.json says 6 messages/, /the index copy holds 5/],
    },
    {
      name: 'a backup of format 2 (made before backups recorded checksums)',
      damage: () => writeFileSync(manifestFile, manifest.replace(/"format": \d+/, '"format": 2')),
      repair: () => writeFileSync(manifestFile, manifest),
      refused: [/format 2/, /SHA-256/, /take a new backup/],
    },
  ];
  for (const [i, c] of cases.entries()) {
    await t.test(c.name, async () => {
      // An absent state directory, and an existing empty one: both left as they were.
      const parent = scope.stateDir('postern-verify-dst-');
      const target = path.join(parent, 'state');
      if (i % 2 === 1) mkdirSync(target, { mode: 0o700 });
      const expected = readdirSync(parent);
      c.damage();
      const refused = await runCli(['restore', '--from', backupDir, '--json'], {
        POSTERN_STATE_DIR: target,
      });
      assert.equal(refused.code, 1, refused.stdout + refused.stderr);
      assert.equal(refused.json.error.code, 'invalid_argument');
      for (const re of c.refused) assert.match(refused.json.error.message, re);
      assert.deepEqual(readdirSync(parent), expected, 'nothing made beside the state directory');
      if (existsSync(target))
        assert.deepEqual(readdirSync(target), [], 'the state directory is still empty');

      c.repair();
      const retried = await runCli(['restore', '--from', backupDir, '--json'], {
        POSTERN_STATE_DIR: target,
      });
      assert.equal(retried.code, 0, retried.stdout + retried.stderr);
      assert.deepEqual([retried.json.messages, retried.json.files], [5, 3]);
      assert.deepEqual(spoolFilesIn(target), spoolFilesIn(stateDir));
      for (const file of spoolFilesIn(stateDir))
        assert.deepEqual(
          readFileSync(path.join(target, file)),
          readFileSync(path.join(stateDir, file)),
          file,
        );
    });
  }
});

test('viewer.key is in the backup: a viewer link made before the backup opens on the restored server', {
  timeout: 120_000,
}, async (t) => {
  const scope = new ProcessScope();
  t.after(() => scope.cleanup());
  const stateDir = scope.stateDir('postern-backup-viewer-');
  const keys = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'viewer'));
  const server = await scope.spawn(stateDir);
  const sent = await post(server.production, '/v1/send', {
    key: keys.liveKey,
    json: validMessage({ subject: 'Shared before the backup' }),
  });
  assert.equal(sent.status, 202, sent.text);
  await server.stop();
  const linkConfig = path.join(scope.stateDir('postern-backup-viewer-cfg-'), 'config.json');
  writeFileSync(linkConfig, JSON.stringify({ viewer: { base_url: 'https://mail.example/' } }));
  const link = await runCli(['message', 'link', sent.body.id as string, '--json'], {
    POSTERN_STATE_DIR: stateDir,
    POSTERN_CONFIG: linkConfig,
  });
  assert.equal(link.code, 0, link.stdout + link.stderr);
  const viewPath = new URL(link.json.url as string).pathname;

  const backupDir = path.join(scope.stateDir('postern-backup-viewer-bk-'), 'copy');
  const made = await runCli(['backup', '--to', backupDir, '--json'], {
    POSTERN_STATE_DIR: stateDir,
  });
  assert.equal(made.code, 0, made.stdout + made.stderr);
  const restoredDir = path.join(scope.stateDir('postern-backup-viewer-dst-'), 'state');
  const restored = await runCli(['restore', '--from', backupDir, '--json'], {
    POSTERN_STATE_DIR: restoredDir,
  });
  assert.equal(restored.code, 0, restored.stdout + restored.stderr);

  const again = await scope.spawn(restoredDir);
  const page = await fetch(`${again.production}${viewPath}`);
  const body = await page.text();
  assert.equal(page.status, 200, body);
  assert.match(body, /Shared before the backup/);
  assert.equal((statSync(path.join(restoredDir, 'viewer.key')).mode & 0o777).toString(8), '600');
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
