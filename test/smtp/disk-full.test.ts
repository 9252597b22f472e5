/**
 * A full state disk, for real: the server's state directory on a tmpfs of a few MiB that the
 * test mounts (root only) and then fills. Every SMTP path answers `451 4.3.0` at once and stores
 * nothing; nothing acknowledged before is lost; the background loops that keep failing to write
 * (the webhook dispatcher) say so once, not ten times a second; once space is back, messages
 * are accepted again.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { SendMailOptions } from 'nodemailer';
import { readMessageRows } from '../support/assertions.js';
import { createProjectWithKeys, spawnPostern, type ProjectWithKeys, type SpawnedPostern } from '../support/postern.js';
import { sleep, withClosedIndex } from '../support/processes.js';
import { starttlsTransport } from '../support/smtpTransport.js';

const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;
const isRoot = process.getuid?.() === 0;

/** The server's last reply to a message, accepted or not. */
async function send(port: number, key: string, extra: SendMailOptions = {}): Promise<string> {
  // Well under the server's idle timeout (60 s): a reply that never comes fails here.
  const transport = starttlsTransport(port, key, { socketTimeout: 30_000 });
  try {
    return String((await transport.sendMail({ from: 'sender@example.com', to: 'rcpt@example.org', subject: 'Disk', text: 'A small message', ...extra })).response);
  } catch (err) {
    const e = err as { response?: string; message: string };
    return e.response ?? `no reply: ${e.message}`;
  } finally {
    transport.close();
  }
}

/** Writes files into `dir` until the filesystem refuses (ENOSPC); returns them. */
function fill(dir: string): string[] {
  const files: string[] = [];
  for (const size of [64 * 1024, 512]) {
    const file = path.join(dir, `filler-${size}`);
    files.push(file);
    const fd = openSync(file, 'w');
    const block = Buffer.alloc(size, 0x61);
    try {
      for (;;) writeSync(fd, block);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
    } finally {
      closeSync(fd);
    }
  }
  return files;
}

interface LogLine {
  time: string;
  level: string;
  msg: string;
}

describe('SMTP with the state disk full (a small tmpfs the test mounts)', { skip: isRoot ? false : 'needs root to mount a small tmpfs for the state directory' }, () => {
  let mount = '';
  let stateDir = '';
  let server: SpawnedPostern;
  let keys: ProjectWithKeys;
  let port = 0;

  before(() => {
    mount = mkdtempSync(path.join(tmpdir(), 'postern-disk-full-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m,mode=0700', 'tmpfs', mount]);
    stateDir = path.join(mount, 'state');
  });

  after(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) await server.kill();
    if (mount) {
      execFileSync('umount', [mount]);
      rmSync(mount, { recursive: true, force: true });
    }
  });

  test('every SMTP path answers 451 4.3.0 at once and keeps nothing, the webhook dispatcher logs its failing writes once, and sending works again once space is back', async () => {
    keys = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'disk full', 'pro'));
    const configFile = path.join(mount, 'config.json');
    writeFileSync(configFile, JSON.stringify({ delivery: { enabled: false } }));
    server = await spawnPostern(stateDir, { POSTERN_CONFIG: configFile });
    const listener = server.listeners.find((l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'));
    assert.ok(listener);
    port = listener.port;

    // Two acknowledged messages. The second one's mail.accepted event leaves the webhook
    // dispatcher a cursor to write a few seconds later (it writes at most every 5 s), while the
    // disk is full.
    const acknowledged = [await send(port, keys.liveKey), await send(port, keys.liveKey)].map((r) => QUEUED.exec(r)?.[1]);
    assert.ok(acknowledged.every(Boolean), `both accepted: ${acknowledged.join(', ')}`);

    const fullFrom = new Date().toISOString();
    const fillers = fill(mount);
    // Over smtp.in_memory_message_bytes (256 KiB): the streaming path; then the held path.
    const streamed = await send(port, keys.liveKey, { attachments: [{ filename: 'big.bin', content: Buffer.alloc(1024 * 1024, 0x62) }] });
    const held = await send(port, keys.liveKey);
    assert.match(streamed, /^451 4\.3\.0 server_error: /);
    assert.match(held, /^451 4\.3\.0 server_error: /);
    // Long enough for the dispatcher's cursor write to come due (within 5 s) and fail, again and
    // again, with room for a loaded machine. (The log cannot be watched instead: pino's
    // destination is buffered until the process stops.)
    await sleep(12_000);
    const fullUntil = new Date().toISOString();
    for (const file of fillers) rmSync(file);

    const after = QUEUED.exec(await send(port, keys.liveKey))?.[1];
    assert.ok(after, 'accepted again once space is back');
    assert.deepEqual(readdirSync(path.join(stateDir, 'spool', 'tmp')), [], 'no temp file left behind');
    // The dispatcher retries at most 5 s apart: time for it to find the space again.
    await sleep(5500);
    await server.stop();

    const rows = readMessageRows<{ id: string; spool_path: string }>(stateDir);
    assert.deepEqual([...rows.keys()].sort(), [...acknowledged, after].sort(), 'exactly the acknowledged messages are stored');
    for (const row of rows.values()) assert.ok(existsSync(path.join(stateDir, 'spool', row.spool_path)), `${row.id} has its file`);

    const lines = server
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine);
    const whileFull = lines.filter((l) => l.time >= fullFrom && l.time <= fullUntil);
    const dispatcherFailures = whileFull.filter((l) => /^webhook dispatcher (write|cycle) failed$/.test(l.msg));
    assert.ok(dispatcherFailures.length >= 1, 'the dispatcher met the full disk');
    assert.ok(dispatcherFailures.length <= 2, `logged once, not per attempt: ${dispatcherFailures.length} lines in ${whileFull.length}`);
    assert.ok(lines.some((l) => l.msg === 'webhook dispatcher write failed: recovered'), 'and said when it recovered');
  });
});
