/**
 * Issue 32, item 10: what another user plants in a state directory they could write to (0777, as
 * an attacker's probe found it) is refused at start with exit code 78 naming the file and why,
 * and nothing is changed through it. On today's main a symbolic link `postern.db` made Postern
 * chmod the file it pointed at; links in the spool, `viewer.key` and `certs/` were followed too.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  cliPath,
  createProjectWithKeys,
  ephemeralListenerEnv,
  post,
  validMessage,
} from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';

const scope = new ProcessScope();
after(() => scope.cleanup());

const modeOf = (p: string) => statSync(p).mode & 0o7777;
/** The uid of `nobody` on Debian: a user other than the one the tests (and Postern) run as. */
const NOBODY = 65534;

/** A state directory a server has run in: index, a spool file, a retired file in spool/free, viewer.key, certs/. */
let prepared: string;
/** The spool file of the message accepted while preparing, relative to the state directory. */
let spoolFile: string;
/** A config outside the state directories: nothing the test writes is in them but what it plants. */
let configFile: string;

before(async () => {
  configFile = path.join(scope.stateDir('postern-planted-config-'), 'config.json');
  writeFileSync(configFile, JSON.stringify({ delivery: { enabled: false } }));
  prepared = scope.stateDir('postern-planted-src-');
  const { liveKey } = await withClosedIndex(prepared, (ctx) => createProjectWithKeys(ctx));
  const server = await scope.spawn(prepared, { POSTERN_CONFIG: configFile });
  // Over spool.index_body_max_bytes: a spool file.
  const sent = await post(server.production, '/v1/send', {
    key: liveKey,
    json: validMessage({ text: 'x'.repeat(70_000) }),
  });
  assert.equal(sent.status, 202, sent.text);
  await server.stop();
  const day = readdirSync(path.join(prepared, 'spool')).find((name) =>
    /^\d{4}-\d{2}-\d{2}$/.test(name),
  )!;
  spoolFile = path.join('spool', day, `${sent.body.id as string}.eml`);
  for (const made of ['postern.db', spoolFile, 'viewer.key', 'certs/postern.key'])
    assert.ok(existsSync(path.join(prepared, made)), `${made} was made`);
  // As a retired file left by a previous run (Spool.retire): adopted at start, reused for new mail.
  writeFileSync(path.join(prepared, 'spool', 'free', 'previous-run.1'), '', { mode: 0o600 });
});

/** A copy of the prepared state directory, opened to everyone (0777) as in the probe. */
function openStateDir(): string {
  const dir = path.join(scope.stateDir('postern-planted-'), 'state');
  cpSync(prepared, dir, { recursive: true });
  chmodSync(dir, 0o777);
  return dir;
}

/** A file outside the state directory, readable by all: what a planted link points at. */
function victim(content: string | Buffer): string {
  const file = path.join(scope.stateDir('postern-planted-victim-'), 'precious');
  writeFileSync(file, content);
  chmodSync(file, 0o644);
  return file;
}

interface StartOutcome {
  /** The exit code; null when the server started (it is then stopped). */
  code: number | null;
  started: boolean;
  error?: { code: string; message: string; key?: string };
}

/** `postern start --json` on `stateDir`: whether it started (then stopped at once), or how it exited. */
function start(stateDir: string): Promise<StartOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, 'start', '--json'], {
      env: {
        ...process.env,
        ...ephemeralListenerEnv(),
        POSTERN_STATE_DIR: stateDir,
        POSTERN_CONFIG: configFile,
        POSTERN_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let started = false;
    child.stdout.on('data', (d) => {
      stdout += d;
      if (!started && stdout.includes('"status":"listening"')) {
        started = true;
        child.kill('SIGTERM');
      }
    });
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => {
      const first = stdout.split('\n')[0];
      const parsed = first.startsWith('{"error"')
        ? (JSON.parse(first) as { error: StartOutcome['error'] })
        : undefined;
      resolve({ code: started ? null : code, started, error: parsed?.error });
    });
  });
}

function assertRefused(outcome: StartOutcome, file: RegExp, why: RegExp): void {
  assert.equal(outcome.started, false, 'the server must not start');
  assert.equal(outcome.code, 78, JSON.stringify(outcome));
  assert.equal(outcome.error?.code, 'config_invalid');
  assert.equal(outcome.error?.key, 'state_dir');
  assert.match(outcome.error!.message, file);
  assert.match(outcome.error!.message, why);
}

describe("a state directory others could write to: planted links and other users' files are refused, and nothing is changed through them", () => {
  const links: {
    name: string;
    entry: () => string;
    content: () => string | Buffer;
    file: RegExp;
  }[] = [
    {
      name: 'the index (postern.db)',
      entry: () => 'postern.db',
      content: () => 'not your index',
      file: /postern\.db/,
    },
    {
      name: "a message's spool file",
      entry: () => spoolFile,
      content: () => 'Subject: not the message\r\n\r\nplanted\r\n',
      file: /\.eml/,
    },
    {
      name: 'a retired spool file (spool/free), which new mail would be written into',
      entry: () => 'spool/free/previous-run.1',
      content: () => 'precious bytes',
      file: /previous-run\.1/,
    },
    {
      name: 'viewer.key (links signed with a key the attacker knows)',
      entry: () => 'viewer.key',
      content: () => 'ab'.repeat(32),
      file: /viewer\.key/,
    },
    // The target holds the real key, so a Postern that follows the link starts serving with it.
    {
      name: "the SMTP listeners' private key (certs/postern.key)",
      entry: () => 'certs/postern.key',
      content: () => readFileSync(path.join(prepared, 'certs', 'postern.key')),
      file: /certs\/postern\.key/,
    },
  ];
  for (const link of links) {
    test(`a symbolic link in place of ${link.name}: exit 78 naming it, the target's mode and bytes unchanged`, async () => {
      const dir = openStateDir();
      const planted = path.join(dir, link.entry());
      const content = link.content();
      const target = victim(content);
      rmSync(planted);
      symlinkSync(target, planted);

      assertRefused(await start(dir), link.file, /is a symbolic link/);
      assert.equal(modeOf(target).toString(8), '644', 'the target keeps its mode');
      assert.deepEqual(readFileSync(target), Buffer.from(content), 'the target keeps its bytes');
    });
  }

  test('a symbolic link in place of the spool directory itself: exit 78, nothing written or removed where it points', async () => {
    const dir = openStateDir();
    const elsewhere = scope.stateDir('postern-planted-dir-');
    writeFileSync(path.join(elsewhere, 'keep.txt'), 'keep');
    chmodSync(elsewhere, 0o755);
    renameSync(path.join(dir, 'spool'), path.join(dir, 'spool.real'));
    symlinkSync(elsewhere, path.join(dir, 'spool'));

    assertRefused(await start(dir), /spool/, /is a symbolic link/);
    assert.deepEqual(readdirSync(elsewhere), ['keep.txt']);
    assert.equal(modeOf(elsewhere).toString(8), '755');
  });

  const foreign: { name: string; entry: string }[] = [
    { name: 'the index (postern.db)', entry: 'postern.db' },
    { name: 'viewer.key', entry: 'viewer.key' },
    { name: 'the spool directory', entry: 'spool' },
  ];
  for (const f of foreign) {
    test(`${f.name} owned by another user (nobody): exit 78 naming it and its owner, left as it was`, async () => {
      const dir = openStateDir();
      const file = path.join(dir, f.entry);
      chmodSync(file, statSync(file).isDirectory() ? 0o755 : 0o644);
      chownSync(file, NOBODY, NOBODY);

      assertRefused(
        await start(dir),
        new RegExp(f.entry.replace('.', '\\.')),
        new RegExp(`owned by uid ${NOBODY}`),
      );
      assert.equal(statSync(file).uid, NOBODY);
      assert.equal(
        modeOf(file).toString(8),
        statSync(file).isDirectory() ? '755' : '644',
        'its mode is not changed',
      );
    });
  }

  test('the same state directory without the planted files starts, and is made private', async () => {
    const dir = openStateDir();
    const outcome = await start(dir);
    assert.equal(outcome.started, true, JSON.stringify(outcome));
    assert.equal(modeOf(dir).toString(8), '700');
  });
});
