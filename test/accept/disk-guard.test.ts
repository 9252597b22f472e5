/**
 * The disk guard (issue 21), on a small real filesystem: the state directory on a 24 MiB tmpfs
 * the test mounts (root only). Below spool.min_free_bytes new mail is refused before the disk is
 * full (HTTP 503 storage_low with Retry-After in the contract's envelope, SMTP 452 4.3.1) while
 * delivery, webhooks and the console keep working and /readyz says why; with the disk then
 * actually full nothing acknowledged is lost, no empty or half-written spool file is left and
 * the process keeps running; once space is freed acceptance resumes by itself.
 */
import assert from 'node:assert/strict';
import { readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { attachProvider } from '../../src/operator/providers.js';
import { readMessageRows } from '../support/assertions.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  runCli,
  type SpawnedPostern,
  spawnPostern,
  validMessage,
} from '../support/postern.js';
import { sqliteOnly } from '../support/postgres.js';
import { withClosedIndex } from '../support/processes.js';
import { Sink } from '../support/relaySink.js';
import { fill, fillLeaving, isRoot, mountSmallDisk, NEEDS_ROOT } from '../support/smallDisk.js';
import { lastReply } from '../support/smtpTransport.js';
import { readStoredMime } from '../support/storedMime.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const MIB = 1024 * 1024;
// Room below the guard for what keeps writing meanwhile: the index's WAL grows up to its checkpoint (about 4 MiB).
const GUARD = 10 * MIB;

/** Every regular file under `dir`, with its size. */
function filesUnder(dir: string): { file: string; size: number }[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const file = path.join(e.parentPath, e.name);
      return { file, size: statSync(file).size };
    });
}

// About the spool and the SQLite index filling this disk: on PostgreSQL the rows and bodies are in the database.
describe('the disk guard on a 24 MiB tmpfs the test mounts', {
  skip: isRoot ? sqliteOnly() : NEEDS_ROOT,
}, () => {
  let disk: ReturnType<typeof mountSmallDisk> | null = null;
  let server: SpawnedPostern | null = null;
  let sink: Sink | null = null;
  let hooks: WebhookReceiver | null = null;

  before(() => {
    disk = mountSmallDisk('postern-disk-guard-', 24);
  });

  after(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null)
      await server.kill();
    await sink?.close();
    await hooks?.close();
    disk?.unmount();
  });

  test('refuses new mail below spool.min_free_bytes (503 storage_low, 452 4.3.1) while delivery, webhooks and the console go on, loses nothing when the disk is full, and resumes by itself', async () => {
    const mount = disk!.mount;
    const stateDir = path.join(mount, 'state');
    // The relay first answers 451 (the message waits on the retry ladder), then takes it while the guard refuses.
    sink = await Sink.start('guard-relay', {
      mail: () => ({ code: 451, text: '4.3.0 Try again later' }),
    });
    hooks = await WebhookReceiver.start();
    const configFile = path.join(mount, 'config.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        spool: { min_free_bytes: GUARD },
        delivery: { enabled: true, poll_interval_ms: 50, retry_ladder_seconds: [1] },
        webhooks: {
          allow_private_targets: true,
          poll_interval_ms: 50,
          nice: 0,
          saturated_cpu_share: 64,
        },
      }),
    );
    const env = { POSTERN_CONFIG: configFile, POSTERN_STATE_DIR: stateDir };
    const keys: ProjectWithKeys = await withClosedIndex(stateDir, async (ctx) => {
      const pk = await createProjectWithKeys(ctx, 'disk guard', 'pro', { provider: false });
      await attachProvider(ctx, pk.project.id, {
        slug: 'smtp',
        host: '127.0.0.1',
        port: String(sink!.port),
        tls: 'none',
      });
      return pk;
    });
    const hook = await runCli(
      [
        'webhook',
        'add',
        '--project',
        keys.project.id,
        '--url',
        `http://127.0.0.1:${hooks.port}/sent`,
        '--events',
        'mail.sent',
        '--json',
      ],
      env,
    );
    assert.equal(hook.code, 0, hook.stdout + hook.stderr);

    server = await spawnPostern(stateDir, env);
    const smtpPort = server.listeners.find(
      (l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'),
    )!.port;
    const consoleUrl = server.listeners.find((l) => l.protocol === 'console')!.url;
    const acknowledged: string[] = [];

    const first = await post(server.production, '/v1/send', {
      key: keys.liveKey,
      json: validMessage(),
    });
    assert.equal(first.status, 202, first.text);
    acknowledged.push(first.body.id as string);
    await waitFor(
      () => sink!.mailCount >= 1,
      HANG_GUARD_MS,
      'the first hand-off (refused by the relay)',
    );

    // Below the guard, not yet full.
    const fillers = fillLeaving(mount, 7 * MIB);
    const refused = await waitFor(
      async () => {
        const res = await post(server!.production, '/v1/send', {
          key: keys.liveKey,
          json: validMessage(),
        });
        if (res.status === 202) acknowledged.push(res.body.id as string);
        return res.status === 503 ? res : null;
      },
      HANG_GUARD_MS,
      'the guard to refuse',
    );
    assert.equal(refused.headers.get('retry-after'), '30');
    assert.deepEqual(Object.keys(refused.body.error).sort(), ['code', 'message', 'type']);
    assert.equal(refused.body.error.type, 'api_error');
    assert.equal(refused.body.error.code, 'storage_low');
    // The wait once, in SMTP's words: no "Retry-After" header for an SMTP client to look for.
    assert.match(
      await lastReply(smtpPort, keys.liveKey),
      /^452 4\.3\.1 storage_low: [\s\S]*nothing was accepted\. Retry in 30 seconds\.$/,
    );

    const ready = await fetch(`${server.production}/readyz`);
    assert.equal(ready.status, 503);
    const report = (await ready.json()) as { status: string; failing: string[]; checks: unknown };
    assert.deepEqual([report.status, report.failing], ['not_ready', ['disk']]);
    assert.equal((await fetch(`${consoleUrl}/readyz`)).status, 503);
    assert.equal(
      (await fetch(`${server.production}/healthz`)).status,
      200,
      'still alive: /healthz is liveness only',
    );
    const consoleAnswer = await fetch(`${consoleUrl}/console/api/v1/session`);
    assert.equal(consoleAnswer.status, 401, 'the console still answers');

    // Delivery and webhooks go on: the relay now takes the waiting message, and mail.sent is posted.
    sink.behaviour = {};
    await waitFor(
      () => sink!.received.length >= 1,
      HANG_GUARD_MS,
      'the waiting message to be relayed while the guard refuses',
    );
    await hooks.waitFor(1, '/sent');

    // Now actually full.
    fillers.push(...fill(mount));
    assert.equal(
      (await post(server.production, '/v1/send', { key: keys.liveKey, json: validMessage() }))
        .status,
      503,
    );
    assert.match(
      await lastReply(smtpPort, keys.liveKey, {
        attachments: [{ filename: 'big.bin', content: Buffer.alloc(1024 * 1024, 0x62) }],
      }),
      /^452 4\.3\.1 storage_low: /,
    );
    assert.equal(server.child.exitCode, null, 'the process is still running');

    // Space back: acceptance resumes by itself (the guard reads statfs every second).
    for (const file of fillers) rmSync(file);
    const resumed = await waitFor(
      async () => {
        const res = await post(server!.production, '/v1/send', {
          key: keys.liveKey,
          json: validMessage(),
        });
        return res.status === 202 ? res : null;
      },
      HANG_GUARD_MS,
      'acceptance to resume',
    );
    acknowledged.push(resumed.body.id as string);
    const viaSmtp = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/.exec(
      await lastReply(smtpPort, keys.liveKey),
    )?.[1];
    assert.ok(viaSmtp, 'SMTP accepts again');
    acknowledged.push(viaSmtp);
    assert.equal((await fetch(`${server.production}/readyz`)).status, 200);

    assert.equal(await server.stop(), 0, 'a clean exit');
    const rows = readMessageRows<{ id: string; spool_path: string }>(stateDir);
    assert.deepEqual(
      [...rows.keys()].sort(),
      [...acknowledged].sort(),
      'exactly the acknowledged messages are stored',
    );
    for (const row of rows.values()) {
      const stored = await readStoredMime(stateDir, row);
      assert.ok(
        Buffer.isBuffer(stored) && stored.length > 0,
        `${row.id} has its whole MIME: ${typeof stored === 'string' ? stored : 'empty'}`,
      );
    }
    assert.deepEqual(
      readdirSync(path.join(stateDir, 'spool', 'tmp')),
      [],
      'no temp file left behind',
    );
    const empty = filesUnder(path.join(stateDir, 'spool')).filter(
      (f) => f.size === 0 && !f.file.startsWith(path.join(stateDir, 'spool', 'free') + path.sep),
    );
    assert.deepEqual(empty, [], 'no empty spool file');
  });
});
