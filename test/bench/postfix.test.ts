import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { describe, test } from 'node:test';
import { benchCertificate } from '../../bench/benchServer.js';
import { PostfixInstance } from '../../bench/postfix.js';
import { buildMessage, openBenchSession, sendPipelined } from '../../bench/smtpClient.js';
import { repoRoot } from '../support/paths.js';

/**
 * The bench's private Postfix instance (bench/postfix.ts), the anchor `npm run bench` compares
 * Postern with: it must take mail the way the load generator speaks (STARTTLS + AUTH PLAIN),
 * hold what it acknowledged, and leave nothing running, however the bench ends. Postfix comes
 * from the test prerequisites; the instance starts as root, so without root these are skipped.
 */
const notRoot = process.getuid?.() !== 0 ? 'a Postfix instance starts as root' : false;

/** Pids of processes whose environment names `configDir` as Postfix's MAIL_CONFIG (its daemons' command lines do not). */
function processesOf(configDir: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (
        readFileSync(`/proc/${name}/environ`, 'latin1')
          .split('\0')
          .includes(`MAIL_CONFIG=${configDir}`)
      )
        pids.push(Number(name));
    } catch {
      // Gone meanwhile, or a zombie.
    }
  }
  return pids;
}

describe('the bench Postfix instance', { skip: notRoot }, () => {
  test('takes a message over STARTTLS + AUTH PLAIN, holds it as a queue file, and stop leaves none of its processes', async () => {
    const postfix = await PostfixInstance.create(await benchCertificate());
    try {
      assert.equal(postfix.security, 'STARTTLS + AUTH PLAIN (Cyrus SASL, sasldb)');
      await postfix.start({ sinkPort: 9, delivery: false });
      assert.ok(processesOf(postfix.configDir).length > 0, 'the instance runs');
      const client = await openBenchSession('127.0.0.1', postfix.port, postfix.credentials);
      const reply = await sendPipelined(
        client,
        'bench@example.com',
        'rcpt@example.org',
        buildMessage('test'),
      );
      await client.quit();
      assert.match(reply, /^250 2\.0\.0 Ok: queued as [0-9A-Za-z]+$/);
      assert.equal(postfix.queuedFiles(), 1);
      // A wrong password is refused: the instance does not relay for anyone who asks.
      const refused = await openBenchSession('127.0.0.1', postfix.port, {
        user: postfix.credentials!.user,
        password: 'wrong',
      }).then(
        () => 'accepted',
        (err: Error) => err.message,
      );
      assert.match(refused, /535 5\.7\.8/);
      postfix.stop();
      assert.deepEqual(processesOf(postfix.configDir), []);
    } finally {
      postfix.stop();
      rmSync(postfix.dir, { recursive: true, force: true });
    }
  });

  test('a bench interrupted with SIGINT stops its Postfix instance and removes its directory', async () => {
    const script = `
      import { benchCertificate } from ${JSON.stringify(path.join(repoRoot, 'dist/bench/benchServer.js'))};
      import { PostfixInstance } from ${JSON.stringify(path.join(repoRoot, 'dist/bench/postfix.js'))};
      const postfix = await PostfixInstance.create(await benchCertificate());
      await postfix.start({ sinkPort: 9, delivery: false });
      console.log(JSON.stringify({ dir: postfix.dir, configDir: postfix.configDir }));
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      void exited.then(() => reject(new Error(`the bench script exited first: ${stderr}`)));
    });
    const { dir, configDir } = JSON.parse(line) as { dir: string; configDir: string };
    try {
      assert.ok(processesOf(configDir).length > 0, 'the instance runs');
      child.kill('SIGINT');
      const [code] = await exited;
      assert.equal(code, 130, stderr);
      assert.deepEqual(processesOf(configDir), []);
      assert.equal(existsSync(dir), false);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      // Were the test to fail: stop what the script left behind.
      for (const pid of processesOf(configDir)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
