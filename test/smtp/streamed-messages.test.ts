/**
 * `smtp.max_streamed_messages`: big messages (over `smtp.in_memory_message_bytes`) streamed at
 * once. One beyond the cap is not read until one finishes (TCP holds its client back), its idle
 * timeout does not run meanwhile, and past `smtp.stream_wait_ms` it is drained unstored and
 * answered `451 4.3.0 server_busy`. Over real sockets, against a real spool and index.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createProjectWithKeys, startTestPostern, type TestPostern } from '../support/postern.js';
import { authedSession, type RawSmtp } from '../support/rawSmtp.js';
import { storedMimeOf } from '../support/storedMime.js';
import { HANG_GUARD_MS, settle, waitFor } from '../support/waiting.js';

const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;
const KiB = 1024;
const MiB = 1024 * KiB;

/** Files in the spool's temp directory: a streamed message has one from its first byte written. */
const tmpFiles = (p: TestPostern) => readdirSync(path.join(p.stateDir, 'spool', 'tmp'));

/** MAIL, RCPT, DATA, then a message up to its attachment's base64 lines (writeBody, finish). */
async function openMessage(client: RawSmtp, subject: string): Promise<void> {
  assert.match(await client.command('MAIL FROM:<sender@example.com>'), /^250 /);
  assert.match(await client.command('RCPT TO:<rcpt@example.org>'), /^250 /);
  assert.match(await client.command('DATA'), /^354 /);
  await client.writeAll(
    `From: sender@example.com\r\nTo: rcpt@example.org\r\nSubject: ${subject}\r\nMIME-Version: 1.0\r\n` +
      'Content-Type: multipart/mixed; boundary="part"\r\n\r\n--part\r\nContent-Type: text/plain\r\n\r\nA big attachment follows.\r\n' +
      '--part\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename="blob.bin"\r\n\r\n',
  );
}

const LINE = `${'QUJD'.repeat(19)}\r\n`; // 76 base64 characters: 57 bytes decoded

/** `bytes` of base64 body lines, 64 KiB at a time as the socket takes them. */
async function writeBody(client: RawSmtp, bytes: number): Promise<void> {
  const block = LINE.repeat(Math.floor((64 * KiB) / LINE.length));
  for (let sent = 0; sent < bytes; sent += block.length) await client.writeAll(block);
}

/** The closing boundary and the final dot; the reply to it. */
async function finish(client: RawSmtp): Promise<string> {
  client.write('--part--\r\n.\r\n');
  return client.next();
}

/** The message's index row and stored MIME exist: what a 250 promised is durable. */
async function assertStored(p: TestPostern, reply: string): Promise<void> {
  const id = QUEUED.exec(reply)?.[1];
  assert.ok(id, `accepted: ${reply}`);
  const row = await p.ctx.store.get<{
    status: string;
    source: string;
    spool_path: string;
    size_bytes: number;
  }>('SELECT status, source, spool_path, size_bytes FROM messages WHERE id = ?', id);
  assert.deepEqual(row && { status: row.status, source: row.source }, {
    status: 'queued',
    source: 'smtp',
  });
  // PostgreSQL keeps every body in the database (message_body_chunks); SQLite a big one in its spool file.
  if (p.ctx.store.dialect === 'postgres')
    assert.equal(
      (await storedMimeOf(p.ctx.store, p.stateDir, id)).length,
      row!.size_bytes,
      'its body is stored whole',
    );
  else
    assert.ok(existsSync(path.join(p.stateDir, 'spool', row!.spool_path)), 'its spool file exists');
}

/**
 * Keeps a streaming message's session alive (its client owes input: the idle timeout runs) with
 * a body line every 200 ms, until stopped or the connection is gone.
 */
function trickle(client: RawSmtp): () => Promise<void> {
  let stopped = false;
  void client.closed.then(() => (stopped = true));
  const running = (async () => {
    while (!stopped) {
      await client.writeAll(LINE);
      await settle(200);
    }
  })();
  return async () => {
    stopped = true;
    await running;
  };
}

/**
 * One message streamed at a time, waits for room of `streamWaitMs`, sessions idle for
 * `idleTimeoutMs` closed. A session is opened only once it has something to do, and the 200 ms
 * trickle keeps a streaming one far within its idle timeout on a loaded machine.
 */
function streamingServer(
  streamWaitMs: number,
  idleTimeoutMs: number,
): { p: () => TestPostern; liveKey: () => string } {
  let p: TestPostern;
  let liveKey: string;
  before(async () => {
    p = await startTestPostern({
      smtp: true,
      config: {
        smtp: {
          max_streamed_messages: 1,
          stream_wait_ms: streamWaitMs,
          idle_timeout_ms: idleTimeoutMs,
        },
      },
    });
    liveKey = (await createProjectWithKeys(p.ctx, 'streamed messages')).liveKey;
  });
  after(async () => p.close());
  return { p: () => p, liveKey: () => liveKey };
}

describe('big SMTP messages streamed at once are capped (smtp.max_streamed_messages): one waits for room', () => {
  // A wait for room that nothing here comes near (the first message finishes whenever the test
  // lets it), and an idle timeout the held message is to outlive.
  const IDLE_TIMEOUT_MS = 3000;
  const server = streamingServer(HANG_GUARD_MS, IDLE_TIMEOUT_MS);

  test('a second big message is not read while the first streams (no temp file, its client held back by TCP, no idle timeout), then both are accepted and stored', async () => {
    const p = server.p();
    const first = await authedSession(p.smtp.production.starttls, server.liveKey());
    let second: RawSmtp | undefined;
    try {
      await openMessage(first, 'first');
      await writeBody(first, 512 * KiB);
      const stopFirst = trickle(first);
      await waitFor(() => tmpFiles(p).length === 1, HANG_GUARD_MS, "the first message's temp file");

      second = await authedSession(p.smtp.production.starttls, server.liveKey());
      await openMessage(second, 'second');
      // 12 MB: more than the kernel buffers of a loopback connection hold (tcp_wmem 4 MiB).
      let secondWritten = false;
      const writing = writeBody(second, 12 * MiB).then(() => (secondWritten = true));
      // Longer than the idle timeout: a held session does not time out (a longer sleep, on a
      // loaded machine, shows it all the more).
      await settle(IDLE_TIMEOUT_MS + 1000);
      assert.equal(
        tmpFiles(p).length,
        1,
        'the second message is not streamed to the spool while the first is',
      );
      assert.equal(
        secondWritten,
        false,
        "the second message's client is held back: its 12 MB are not all taken",
      );

      await stopFirst();
      const firstReply = await finish(first);
      await assertStored(p, firstReply);
      await writing;
      const secondReply = await finish(second);
      await assertStored(p, secondReply);
      assert.deepEqual(tmpFiles(p), [], 'no temp file is left');
    } finally {
      await first.quit();
      await second?.quit();
    }
  });
});

describe('big SMTP messages streamed at once are capped (smtp.max_streamed_messages): a wait has its end', () => {
  // An idle timeout the refused session waits within while the first finishes (on a loaded machine too).
  const server = streamingServer(3000, 30_000);

  test('a big message that waits past stream_wait_ms is drained unstored and answered 451 4.3.0 server_busy; retried once there is room, it is accepted', async () => {
    const p = server.p();
    const first = await authedSession(p.smtp.production.starttls, server.liveKey());
    let second: RawSmtp | undefined;
    try {
      await openMessage(first, 'first');
      await writeBody(first, 512 * KiB);
      const stopFirst = trickle(first);
      await waitFor(() => tmpFiles(p).length === 1, HANG_GUARD_MS, "the first message's temp file");

      second = await authedSession(p.smtp.production.starttls, server.liveKey());
      await openMessage(second, 'second');
      // Held for the 3 s wait, then read to its end (all 12 MB are taken) without a byte stored.
      await writeBody(second, 12 * MiB);
      assert.equal(tmpFiles(p).length, 1, 'the refused message was never written to the spool');
      assert.match(
        await finish(second),
        /^451 4\.3\.0 server_busy: Too many large messages are being received at once; nothing was stored\. Retry in 3 seconds\.$/,
      );

      await stopFirst();
      await assertStored(p, await finish(first));
      // The session goes on; with room now, the same message is accepted.
      await openMessage(second, 'second, again');
      await writeBody(second, 1 * MiB);
      await assertStored(p, await finish(second));
    } finally {
      await first.quit();
      await second?.quit();
    }
  });
});
