import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { createProjectWithKeys, post, runCli, validMessage } from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';

const scope = new ProcessScope();
after(() => scope.cleanup());

const modeOf = (p: string) => statSync(p).mode & 0o7777;
const octal = (mode: number) => mode.toString(8).padStart(4, '0');

/** Every file and directory below `dir`, with its mode. */
function modesBelow(dir: string): { path: string; mode: number; isDir: boolean }[] {
  const found: { path: string; mode: number; isDir: boolean }[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    found.push({ path: p, mode: modeOf(p), isDir: entry.isDirectory() });
    if (entry.isDirectory()) found.push(...modesBelow(p));
  }
  return found;
}

describe('the state directory and what Postern writes in it are private', () => {
  test('an existing 0755 state directory and a 0644 index are tightened to 0700 / 0600 at start, and new files are created private', async () => {
    const stateDir = scope.stateDir('postern-perms-');
    const { liveKey } = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx));
    // As an older Postern (or a careless copy) left it: world-readable, secrets and all.
    chmodSync(stateDir, 0o755);
    for (const name of ['postern.db', 'postern.db-wal', 'postern.db-shm']) {
      if (existsSync(path.join(stateDir, name))) chmodSync(path.join(stateDir, name), 0o644);
    }

    const server = await scope.spawn(stateDir);
    // Over spool.index_body_max_bytes: a spool file is created too.
    const sent = await post(server.production, '/v1/send', {
      key: liveKey,
      json: validMessage({ text: 'x'.repeat(70_000) }),
    });
    assert.equal(sent.status, 202, sent.text);
    await server.stop();

    assert.equal(octal(modeOf(stateDir)), '0700');
    for (const name of ['postern.db', 'postern.db-wal', 'postern.db-shm']) {
      const file = path.join(stateDir, name);
      if (existsSync(file)) assert.equal(octal(modeOf(file)), '0600', name);
    }
    // Everything the server created (spool day directories and files, certificates' directory)
    // gives nothing to group or others; the test's own config file is not Postern's.
    const created = modesBelow(stateDir).filter(
      (e) => !e.path.endsWith('test-config.json') && !e.path.endsWith('postern.crt'),
    );
    assert.ok(
      created.some((e) => e.path.endsWith('.eml')),
      'the accepted message is in the spool',
    );
    for (const e of created) assert.equal(e.mode & 0o077, 0, `${e.path} is ${octal(e.mode)}`);
  });

  test('a new state directory is created 0700 with a 0600 index', async () => {
    const parent = scope.stateDir('postern-perms-new-');
    const stateDir = path.join(parent, 'state');
    const r = await runCli(['project', 'create', '--name', 'x', '--json'], {
      POSTERN_STATE_DIR: stateDir,
    });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(octal(modeOf(stateDir)), '0700');
    assert.equal(octal(modeOf(path.join(stateDir, 'postern.db'))), '0600');
  });

  test('a shared directory (sticky bit, like /tmp) is refused as state_dir with a config error, and left as it was', async () => {
    const shared = path.join(scope.stateDir('postern-perms-sticky-'), 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const r = await runCli(['project', 'list', '--json'], { POSTERN_STATE_DIR: shared });
    assert.equal(r.code, 78, r.stdout + r.stderr);
    assert.equal(r.json.error.code, 'config_invalid');
    assert.equal(r.json.error.key, 'state_dir');
    assert.match(r.json.error.message, /shared directory \(mode 1777, sticky bit\)/);
    assert.equal(octal(modeOf(shared)), '1777');
    assert.deepEqual(readdirSync(shared), []);
  });
});
