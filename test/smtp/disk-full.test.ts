/**
 * A full state disk, for real: the server's state directory on a tmpfs of a few MiB that the
 * test mounts (root only) and then fills. Every SMTP path answers `451 4.3.0` at once and stores
 * nothing; nothing acknowledged before is lost; the background loops that keep failing to write
 * (the webhook dispatcher) say so once, not ten times a second; once space is back, messages
 * are accepted again.
 */
import assert from 'node:assert/strict';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { addWebhook } from '../../src/operator/webhookEndpoints.js';
import { readMessageRows } from '../support/assertions.js';
import { jsonLogLines } from '../support/logLines.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  type SpawnedPostern,
  spawnPostern,
} from '../support/postern.js';
import { sqliteOnly } from '../support/postgres.js';
import { withClosedIndex } from '../support/processes.js';
import { fill, isRoot, mountSmallDisk, NEEDS_ROOT } from '../support/smallDisk.js';
import { lastReply } from '../support/smtpTransport.js';
import { readStoredMime } from '../support/storedMime.js';
import { gate, HANG_GUARD_MS, settle, waitFor } from '../support/waiting.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;

interface LogLine {
  time: string;
  level: string;
  msg: string;
}

/** The webhook deliveries' statuses, read from outside the server (a read-only connection). */
function deliveryStatuses(stateDir: string): string[] {
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    return db
      .prepare('SELECT status FROM webhook_deliveries ORDER BY seq')
      .pluck()
      .all() as string[];
  } finally {
    db.close();
  }
}

// About the SQLite index and the spool on the full disk (on PostgreSQL neither is on it).
describe('SMTP with the state disk full (a small tmpfs the test mounts)', {
  skip: sqliteOnly() || (isRoot ? false : NEEDS_ROOT),
}, () => {
  let disk: ReturnType<typeof mountSmallDisk> | null = null;
  let mount = '';
  let stateDir = '';
  let server: SpawnedPostern;
  let keys: ProjectWithKeys;
  let port = 0;
  let receiver: WebhookReceiver | null = null;

  before(() => {
    disk = mountSmallDisk('postern-disk-full-', 16);
    mount = disk.mount;
    stateDir = path.join(mount, 'state');
  });

  after(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null)
      await server.kill();
    await receiver?.close();
    disk?.unmount();
  });

  test('every SMTP path answers 451 4.3.0 at once and keeps nothing, the webhook dispatcher logs its failing writes once, and sending works again once space is back', async () => {
    // A webhook endpoint whose answers (after the first) wait until the disk is full: the
    // outcome of a delivery is then written while it is full.
    const full = gate();
    receiver = await WebhookReceiver.start();
    receiver.respond = (_req, previous) =>
      previous === 0 ? { status: 200 } : { status: 200, until: full.opened };
    const hookUrl = receiver.url();
    keys = await withClosedIndex(stateDir, async (ctx) => {
      const created = await createProjectWithKeys(ctx, 'disk full', 'pro');
      await addWebhook(
        {
          ...ctx,
          config: {
            ...ctx.config,
            webhooks: { ...ctx.config.webhooks, allow_private_targets: true },
          },
        },
        created.project.id,
        hookUrl,
      );
      return created;
    });
    const configFile = path.join(mount, 'config.json');
    // No disk guard here (it would refuse first, with 452): this test is about the disk actually
    // full. The dispatcher at full priority, and a delivery timeout the held answer never meets.
    writeFileSync(
      configFile,
      JSON.stringify({
        delivery: { enabled: false },
        spool: { min_free_bytes: 0 },
        webhooks: {
          allow_private_targets: true,
          nice: 0,
          saturated_cpu_share: 64,
          timeout_ms: 600_000,
        },
      }),
    );
    server = await spawnPostern(stateDir, { POSTERN_CONFIG: configFile });
    const listener = server.listeners.find(
      (l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'),
    );
    assert.ok(listener);
    port = listener.port;

    // Two acknowledged messages; the second one's mail.accepted is delivered and held.
    const acknowledged = [
      await lastReply(port, keys.liveKey),
      await lastReply(port, keys.liveKey),
    ].map((r) => QUEUED.exec(r)?.[1]);
    assert.ok(acknowledged.every(Boolean), `both accepted: ${acknowledged.join(', ')}`);
    await receiver.waitFor(2);

    const fullFrom = new Date().toISOString();
    const fullSince = Date.now();
    const fillers = fill(mount);
    // Over smtp.in_memory_message_bytes (256 KiB): the streaming path; then the held path.
    const streamed = await lastReply(port, keys.liveKey, {
      attachments: [{ filename: 'big.bin', content: Buffer.alloc(1024 * 1024, 0x62) }],
    });
    const held = await lastReply(port, keys.liveKey);
    assert.match(streamed, /^451 4\.3\.0 server_error: /);
    assert.match(held, /^451 4\.3\.0 server_error: /);
    // The held delivery is answered: its outcome is for the dispatcher to write (within its 25 ms
    // write gap, at full priority here), and it fails, again and again. Its log (its thread's, in
    // 4 KiB blocks) is read once the server has stopped, so nothing shows the failure as it
    // happens: the disk stays full for a while of real time, hundreds of times that gap.
    full.open();
    await waitFor(
      () => receiver!.inFlight.get('/hook') === 0,
      HANG_GUARD_MS,
      'the held answer to be sent',
    );
    await settle(15_000);
    const fullUntil = new Date().toISOString();
    const fullForMs = Date.now() - fullSince;
    for (const file of fillers) rmSync(file);

    const after = QUEUED.exec(await lastReply(port, keys.liveKey))?.[1];
    assert.ok(after, 'accepted again once space is back');
    assert.deepEqual(
      readdirSync(path.join(stateDir, 'spool', 'tmp')),
      [],
      'no temp file left behind',
    );
    // The dispatcher retries ever more slowly (at most 5 s apart) until it finds the space again:
    // the outcome it held is written.
    await waitFor(
      () => deliveryStatuses(stateDir).every((status) => status === 'delivered'),
      HANG_GUARD_MS,
      'the held outcome to be written once space is back',
    );
    await server.stop();

    const rows = readMessageRows<{ id: string; spool_path: string }>(stateDir);
    assert.deepEqual(
      [...rows.keys()].sort(),
      [...acknowledged, after].sort(),
      'exactly the acknowledged messages are stored',
    );
    for (const row of rows.values()) {
      const stored = await readStoredMime(stateDir, row);
      assert.ok(
        Buffer.isBuffer(stored) && stored.length > 0,
        `${row.id} has its whole MIME: ${typeof stored === 'string' ? stored : 'empty'}`,
      );
    }

    const lines = jsonLogLines<LogLine>(server.stderr());
    const whileFull = lines.filter((l) => l.time >= fullFrom && l.time <= fullUntil);
    const dispatcherFailures = whileFull.filter((l) =>
      /^webhook dispatcher (write|cycle) failed$/.test(l.msg),
    );
    assert.ok(dispatcherFailures.length >= 1, 'the dispatcher met the full disk');
    // Logged when it starts, then at most once a minute (RepeatedFailure), not per attempt.
    assert.ok(
      dispatcherFailures.length <= 1 + Math.floor(fullForMs / 60_000),
      `logged once, not per attempt: ${dispatcherFailures.length} lines in ${whileFull.length}`,
    );
    assert.ok(
      lines.some((l) => l.msg === 'webhook dispatcher write failed: recovered'),
      'and said when it recovered',
    );
  });
});
