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
import { readMessageRows } from '../support/assertions.js';
import { jsonLogLines } from '../support/logLines.js';
import { createProjectWithKeys, spawnPostern, type ProjectWithKeys, type SpawnedPostern } from '../support/postern.js';
import { sleep, withClosedIndex } from '../support/processes.js';
import { fill, isRoot, mountSmallDisk, NEEDS_ROOT } from '../support/smallDisk.js';
import { lastReply } from '../support/smtpTransport.js';
import { readStoredMime } from '../support/storedMime.js';
import { sqliteOnly } from '../support/postgres.js';

const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;

interface LogLine {
  time: string;
  level: string;
  msg: string;
}

// About the SQLite index and the spool on the full disk (on PostgreSQL neither is on it).
describe('SMTP with the state disk full (a small tmpfs the test mounts)', { skip: sqliteOnly() || (isRoot ? false : NEEDS_ROOT) }, () => {
  let disk: ReturnType<typeof mountSmallDisk> | null = null;
  let mount = '';
  let stateDir = '';
  let server: SpawnedPostern;
  let keys: ProjectWithKeys;
  let port = 0;

  before(() => {
    disk = mountSmallDisk('postern-disk-full-', 16);
    mount = disk.mount;
    stateDir = path.join(mount, 'state');
  });

  after(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) await server.kill();
    disk?.unmount();
  });

  test('every SMTP path answers 451 4.3.0 at once and keeps nothing, the webhook dispatcher logs its failing writes once, and sending works again once space is back', async () => {
    keys = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'disk full', 'pro'));
    const configFile = path.join(mount, 'config.json');
    // No disk guard here (it would refuse first, with 452): this test is about the disk actually full.
    writeFileSync(configFile, JSON.stringify({ delivery: { enabled: false }, spool: { min_free_bytes: 0 } }));
    server = await spawnPostern(stateDir, { POSTERN_CONFIG: configFile });
    const listener = server.listeners.find((l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'));
    assert.ok(listener);
    port = listener.port;

    // Two acknowledged messages. The second one's mail.accepted event leaves the webhook
    // dispatcher a cursor to write a few seconds later (it writes at most every 5 s), while the
    // disk is full.
    const acknowledged = [await lastReply(port, keys.liveKey), await lastReply(port, keys.liveKey)].map((r) => QUEUED.exec(r)?.[1]);
    assert.ok(acknowledged.every(Boolean), `both accepted: ${acknowledged.join(', ')}`);

    const fullFrom = new Date().toISOString();
    const fillers = fill(mount);
    // Over smtp.in_memory_message_bytes (256 KiB): the streaming path; then the held path.
    const streamed = await lastReply(port, keys.liveKey, { attachments: [{ filename: 'big.bin', content: Buffer.alloc(1024 * 1024, 0x62) }] });
    const held = await lastReply(port, keys.liveKey);
    assert.match(streamed, /^451 4\.3\.0 server_error: /);
    assert.match(held, /^451 4\.3\.0 server_error: /);
    // Long enough for the dispatcher's cursor write to come due (within 5 s) and fail, again and
    // again, with room for a loaded machine. (The log cannot be watched instead: pino's
    // destination is buffered until the process stops.)
    await sleep(12_000);
    const fullUntil = new Date().toISOString();
    for (const file of fillers) rmSync(file);

    const after = QUEUED.exec(await lastReply(port, keys.liveKey))?.[1];
    assert.ok(after, 'accepted again once space is back');
    assert.deepEqual(readdirSync(path.join(stateDir, 'spool', 'tmp')), [], 'no temp file left behind');
    // The dispatcher retries at most 5 s apart: time for it to find the space again.
    await sleep(5500);
    await server.stop();

    const rows = readMessageRows<{ id: string; spool_path: string }>(stateDir);
    assert.deepEqual([...rows.keys()].sort(), [...acknowledged, after].sort(), 'exactly the acknowledged messages are stored');
    for (const row of rows.values()) {
      const stored = await readStoredMime(stateDir, row);
      assert.ok(Buffer.isBuffer(stored) && stored.length > 0, `${row.id} has its whole MIME: ${typeof stored === 'string' ? stored : 'empty'}`);
    }

    const lines = jsonLogLines<LogLine>(server.stderr());
    const whileFull = lines.filter((l) => l.time >= fullFrom && l.time <= fullUntil);
    const dispatcherFailures = whileFull.filter((l) => /^webhook dispatcher (write|cycle) failed$/.test(l.msg));
    assert.ok(dispatcherFailures.length >= 1, 'the dispatcher met the full disk');
    assert.ok(dispatcherFailures.length <= 2, `logged once, not per attempt: ${dispatcherFailures.length} lines in ${whileFull.length}`);
    assert.ok(lines.some((l) => l.msg === 'webhook dispatcher write failed: recovered'), 'and said when it recovered');
  });
});
