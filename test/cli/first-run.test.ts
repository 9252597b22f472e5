/**
 * A first run as a new user meets it: `postern start` (a real process, as `npm start` runs it,
 * from the checkout, with an empty state directory) prints where the console is and the command
 * that creates the first owner, logs it once, and names the listeners that serve plain text on
 * an address other hosts reach. Running the printed command and signing in at the printed
 * address with the password it prints works; once an operator exists, start says nothing of it.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { cliInvocation, isLoopback } from '../../src/cli/startNotices.js';
import { ConsoleClient, expectStatus } from '../support/console.js';
import { tempDirs } from '../support/hooks.js';
import { ephemeralListenerEnv, repoRoot } from '../support/postern.js';
import { waitFor } from '../support/waiting.js';

const dirs = tempDirs('postern-first-run-');

interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** `node bin/postern.js start ARGS` from the checkout, as `npm start` runs it; the send API's production listener on every address. */
function start(env: Record<string, string>, args: string[] = []): Started {
  let stdout = '';
  let stderr = '';
  const child = spawn(process.execPath, ['bin/postern.js', 'start', ...args], {
    cwd: repoRoot,
    env: {
      ...process.env,
      ...ephemeralListenerEnv(),
      POSTERN_LISTEN_HTTP_PRODUCTION: '0.0.0.0:0',
      POSTERN_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** A command line as the shell would split it (the printed ones quote nothing here). */
function run(
  commandLine: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', commandLine], {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The log lines (JSON, on stderr) with this message. */
const logLines = (stderr: string, msg: RegExp) =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: string; msg: string; [k: string]: unknown })
    .filter((l) => msg.test(l.msg));

describe('first run', () => {
  const running: Started[] = [];
  after(async () => {
    for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  });

  test('an empty state directory: start prints the console address and the command that creates the first owner; following them, the new owner signs in', async () => {
    const env = { POSTERN_STATE_DIR: dirs() };
    const first = start(env);
    running.push(first);
    await waitFor(
      () => first.stdout().includes('choose your own.') || first.child.exitCode !== null,
      undefined,
      'the first-run notice',
    );
    const out = first.stdout();
    assert.match(out, /^status: listening$/m, out + first.stderr());

    // The console's address as bound, and the command as typed in this directory.
    const consoleLine = /^ {2}- name=console .* url=(http:\/\/127\.0\.0\.1:\d+)$/m.exec(out);
    assert.ok(consoleLine, out);
    const consoleUrl = `${consoleLine[1]}/`;
    assert.match(out, /^First run: no operator exists yet\. Create the first owner/m);
    const command =
      /^ {2}(\.\/bin\/postern\.js operator create --email you@example\.com --role owner)$/m.exec(
        out,
      )?.[1];
    assert.ok(command, out);
    assert.ok(out.includes(`sign in with it at ${consoleUrl} and choose your own.`), out);

    // Plain text where others can reach it: the production listener on 0.0.0.0, and only it (the sandbox and console are on loopback, SMTP offers AUTH only over TLS).
    const plain = out.slice(out.indexOf('Plain text on an address other hosts can reach'));
    const production = /^ {2}- name=http-production .* url=(http:\/\/0\.0\.0\.0:\d+)$/m.exec(
      out,
    )![1];
    assert.deepEqual(
      plain
        .split('\n')
        .filter((l) => /^ {2}\S/.test(l))
        .map((l) => l.trim()),
      [`http-production  ${production}`],
    );

    // The new user runs the command as printed (same directory and environment as the server) and signs in with the password it prints.
    const created = await run(command, env);
    assert.equal(created.code, 0, created.stderr);
    const password = /^password: (\S+)$/m.exec(created.stdout)?.[1];
    assert.ok(password, created.stdout);
    const owner = await ConsoleClient.signIn(consoleLine[1], 'you@example.com', password);
    const session = expectStatus(await owner.get('/session'), 200);
    assert.equal(session.operator.role, 'owner');
    assert.equal(
      session.operator.must_change_password,
      true,
      'a generated password is changed at the first sign-in',
    );
    expectStatus(
      await owner.put('/session/password', {
        current_password: password,
        new_password: 'my own passphrase 2026',
      }),
      200,
    );
    expectStatus(await owner.get('/projects'), 200);
    // The console page itself is at the printed address.
    const page = await fetch(consoleUrl);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<div id="app">|<script type="module"/);

    first.child.kill('SIGTERM');
    assert.equal(await first.exited, 0);

    // Logged once (the whole run's log read), with the same facts, for a journal that does not show the output.
    const logged = logLines(first.stderr(), /no operator exists yet/);
    assert.equal(logged.length, 1, first.stderr());
    assert.deepEqual([logged[0].console_url, logged[0].create_owner], [consoleUrl, command]);
    const warned = logLines(first.stderr(), /plain text on an address other hosts can reach/);
    assert.equal(warned.length, 1);
    assert.equal(warned[0].level, 'warn');

    // Started again with an operator: no first-run notice in the output or the log; --json has it as null in its one object.
    const again = start(env, ['--json']);
    running.push(again);
    await waitFor(
      () => again.stdout().includes('\n') || again.child.exitCode !== null,
      undefined,
      'the listening line',
    );
    const line = JSON.parse(again.stdout().split('\n')[0]);
    assert.equal(line.status, 'listening');
    assert.equal(line.first_run, null);
    assert.deepEqual(
      line.plain_text_listeners.map((l: { name: string }) => l.name),
      ['http-production'],
    );
    again.child.kill('SIGTERM');
    assert.equal(await again.exited, 0);
    assert.equal(logLines(again.stderr(), /no operator exists yet/).length, 0);
    assert.equal(
      again.stdout().trim().split('\n').length,
      1,
      '--json: exactly one JSON object on stdout',
    );
  });

  test('--json on a first run: the one object carries first_run with the console address and the command, --config repeated in it', async () => {
    const stateDir = dirs();
    const config = path.join(dirs(), 'my config.json');
    await import('node:fs').then((fs) =>
      fs.writeFileSync(config, JSON.stringify({ delivery: { enabled: false } })),
    );
    const r = start(
      { POSTERN_STATE_DIR: stateDir, POSTERN_LISTEN_HTTP_PRODUCTION: '127.0.0.1:0' },
      ['--json', '--config', config],
    );
    running.push(r);
    await waitFor(
      () => r.stdout().includes('\n') || r.child.exitCode !== null,
      undefined,
      'the listening line',
    );
    const line = JSON.parse(r.stdout().split('\n')[0]);
    const consoleUrl = line.listeners.find(
      (l: { protocol: string }) => l.protocol === 'console',
    ).url;
    assert.deepEqual(line.first_run, {
      console_url: `${consoleUrl}/`,
      create_owner: `./bin/postern.js --config '${config}' operator create --email you@example.com --role owner`,
    });
    assert.deepEqual(line.plain_text_listeners, [], 'every listener on loopback');
    r.child.kill('SIGTERM');
    assert.equal(await r.exited, 0);
  });

  test('which addresses count as loopback, and how the CLI is named in the command', () => {
    for (const host of [
      '127.0.0.1',
      '127.0.0.2',
      '::1',
      '[::1]',
      '0:0:0:0:0:0:0:1',
      '::ffff:127.0.0.1',
      'localhost',
    ])
      assert.equal(isLoopback(host), true, host);
    for (const host of [
      '0.0.0.0',
      '::',
      '192.0.2.10',
      '10.0.0.1',
      '2001:db8::1',
      'mail.example.com',
      '128.0.0.1',
    ])
      assert.equal(isLoopback(host), false, host);
    assert.equal(
      cliInvocation('/srv/postern/bin/postern.js', '/srv/postern', undefined, '/usr/bin'),
      './bin/postern.js',
    );
    assert.equal(
      cliInvocation('/usr/local/bin/postern', '/home/me', undefined, '/usr/bin:/usr/local/bin'),
      'postern',
    );
    assert.equal(
      cliInvocation('/srv/postern/bin/postern.js', '/home/me', 'conf/prod.json', '/usr/bin'),
      '/srv/postern/bin/postern.js --config conf/prod.json',
    );
  });
});
