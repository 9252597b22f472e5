import assert from 'node:assert/strict';
import { closeSync, openSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { Transporter } from 'nodemailer';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { messageRowsOf, type StoredRow, spoolSnapshot } from '../support/assertions.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  type SpawnedPostern,
  spawnPostern,
  tempStateDir,
} from '../support/postern.js';
import { databaseFor, testPool, testStore } from '../support/postgres.js';
import { withClosedIndex } from '../support/processes.js';
import { type PeakRss, watchPeakRss } from '../support/processMemory.js';
import { starttlsTransport } from '../support/smtpTransport.js';

// ---------------------------------------------------------------------------------------------
// Local helpers
// ---------------------------------------------------------------------------------------------

const ACCEPTED_RE = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;
const MiB = 1024 * 1024;

/** Relaying turned off where the config knows about it: accepted messages stay `queued`. */
const NO_DELIVERY = { delivery: { enabled: false } };

/** A project on the `pro` plan (50 GiB a month: room for big messages) with an smtp provider. */
function seedProject(stateDir: string): Promise<ProjectWithKeys> {
  return withClosedIndex(stateDir, (ctx) =>
    createProjectWithKeys(ctx, 'smtp stream project', 'pro'),
  );
}

function transportFor(port: number, key: string): Transporter {
  return starttlsTransport(port, key, {
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 60_000,
  });
}

/**
 * `size` bytes of attachment content produced 64 KiB at a time: the test process never holds
 * the message whole either. The bytes vary (a counter mixed into a pattern) so nothing along
 * the way can shrink them.
 */
function generatedContent(size: number, seed: number): Readable {
  let produced = 0;
  let counter = seed;
  return new Readable({
    read() {
      if (produced >= size) {
        this.push(null);
        return;
      }
      const n = Math.min(64 * 1024, size - produced);
      const chunk = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i += 4) {
        counter = (counter * 1103515245 + 12345) >>> 0;
        chunk.writeUInt32LE(counter, i); // n is a multiple of 4 (all sizes used here are)
      }
      produced += n;
      this.push(chunk);
    },
  });
}

/**
 * `size` bytes of plain ASCII text (70-character lines, CRLF) produced 64 KiB at a time, with
 * nothing quoted-printable would change: a text body as big as it looks on the wire.
 */
function generatedText(size: number): Readable {
  const line = 'The body text of a very long message, counted as it streams by......\r\n';
  const block = Buffer.from(line.repeat(Math.floor((64 * 1024) / line.length)));
  let produced = 0;
  return new Readable({
    read() {
      if (produced >= size) {
        this.push(null);
        return;
      }
      const n = Math.min(block.length, size - produced);
      produced += n;
      this.push(block.subarray(0, n));
    },
  });
}

interface Row extends StoredRow {
  environment: string;
}

/**
 * The stored size of a message's MIME and its first and last bytes, read without holding it
 * whole: its spool file on SQLite; on PostgreSQL its pieces in message_body_chunks.
 */
async function storedHeadAndTail(
  stateDir: string,
  row: Row,
  headBytes: number,
  tailBytes: number,
): Promise<{ size: number; head: Buffer; tail: Buffer }> {
  const head = Buffer.alloc(headBytes);
  const tail = Buffer.alloc(tailBytes);
  if (testStore() === 'postgres') {
    const pool = testPool((await databaseFor(stateDir)).url, 1);
    try {
      const q = postgresQueries(pool);
      const pieces = await q.all<{ seq: number; length: number }>(
        'SELECT seq, length(bytes) AS length FROM message_body_chunks WHERE message_id = ? ORDER BY seq',
        row.id,
      );
      const size = pieces.reduce((sum, p) => sum + p.length, 0);
      // Each piece is a fixed size but the last: read the pieces the head and tail fall in.
      let offset = 0;
      for (const piece of pieces) {
        const start = offset;
        offset += piece.length;
        if (start >= headBytes && offset <= size - tailBytes) continue;
        const bytes = (await q.get<{ bytes: Buffer }>(
          'SELECT bytes FROM message_body_chunks WHERE message_id = ? AND seq = ?',
          row.id,
          piece.seq,
        ))!.bytes;
        if (start < headBytes)
          bytes.copy(head, start, 0, Math.min(bytes.length, headBytes - start));
        const tailStart = size - tailBytes;
        if (offset > tailStart)
          bytes.copy(tail, Math.max(0, start - tailStart), Math.max(0, tailStart - start));
      }
      return { size, head, tail };
    } finally {
      await pool.end();
    }
  }
  const file = path.join(stateDir, 'spool', row.spool_path);
  const size = statSync(file).size;
  const fd = openSync(file, 'r');
  try {
    readSync(fd, head, 0, head.length, 0);
    readSync(fd, tail, 0, tail.length, size - tail.length);
  } finally {
    closeSync(fd);
  }
  return { size, head, tail };
}

/** The SMTP refusal nodemailer reports, reduced to what the server said. */
async function refusalOf(
  promise: Promise<unknown>,
): Promise<{ responseCode: number | undefined; response: string | undefined }> {
  try {
    await promise;
  } catch (err) {
    const e = err as { responseCode?: number; response?: string };
    return { responseCode: e.responseCode, response: e.response };
  }
  throw new Error('the message was accepted');
}

// ---------------------------------------------------------------------------------------------
// Suite
// ---------------------------------------------------------------------------------------------

describe('SMTP DATA is streamed to the spool, never held whole', () => {
  const stateDir = tempStateDir('postern-smtp-stream-');
  let server: SpawnedPostern;
  let keys: ProjectWithKeys;
  let port: number;
  let transport: Transporter;

  before(async () => {
    keys = await seedProject(stateDir);
    const configFile = path.join(stateDir, 'stream.json');
    writeFileSync(configFile, JSON.stringify(NO_DELIVERY));
    server = await spawnPostern(stateDir, { POSTERN_CONFIG: configFile });
    const listener = server.listeners.find(
      (l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'),
    );
    assert.ok(listener, 'the default config has a production STARTTLS listener');
    port = listener.port;
    transport = transportFor(port, keys.liveKey);
  });

  after(async () => {
    transport?.close();
    if (server && server.child.exitCode === null && server.child.signalCode === null)
      await server.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  test("a ~33 MB message (1 MB text, three 8 MB attachments) streams through with the server's RSS growing by less than 64 MB", async (t) => {
    const pid = server.child.pid!;
    // Warm-up: the first message pays for TLS, parser and pipeline set-up, not for its size.
    const warm = await transport.sendMail({
      from: 'Sender <sender@example.com>',
      to: 'rcpt@example.org',
      subject: 'warm-up',
      text: 'warm-up',
    });
    assert.match(String(warm.response), ACCEPTED_RE);
    const watch = watchPeakRss(pid);

    const text = 'Streaming is the whole point of this line. '.repeat(24_000); // ~1 MB, under 2 MiB
    const attachmentBytes = 8_000_000; // each under the 10 MiB cap, 24 MB together under 25 MiB
    let response = '';
    let rss: PeakRss;
    try {
      const info = await transport.sendMail({
        from: 'Sender <sender@example.com>',
        to: 'rcpt@example.org',
        subject: 'A very large message',
        text,
        attachments: [0, 1, 2].map((n) => ({
          filename: `blob-${n}.bin`,
          contentType: 'application/octet-stream',
          content: generatedContent(attachmentBytes, n + 1),
        })),
      });
      response = String(info.response);
    } finally {
      rss = watch.stop();
    }
    const { baseline, peak } = rss;

    const m = ACCEPTED_RE.exec(response);
    assert.ok(m, `250 reply with the id: ${response}`);
    const id = m[1];
    const row = (await messageRowsOf<Row>(stateDir)).get(id);
    assert.ok(row, 'the message has its index row');
    const stored = await storedHeadAndTail(stateDir, row, 64 * 1024, 4 * 1024);
    const size = stored.size;
    t.diagnostic(
      `stored ${size} bytes; server RSS baseline ${(baseline / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB ` +
        `(polled ${(rss.polled / MiB).toFixed(1)}, VmHWM ${rss.hwm === null ? 'not resettable' : (rss.hwm / MiB).toFixed(1)}), growth ${((peak - baseline) / MiB).toFixed(1)} MiB`,
    );
    assert.deepEqual(
      { status: row.status, source: row.source, environment: row.environment },
      { status: 'queued', source: 'smtp', environment: 'production' },
    );
    assert.ok(size >= 30_000_000, `the stored MIME is at least 30,000,000 bytes (${size})`);
    assert.equal(row.size_bytes, size, "the row's size_bytes is the stored MIME's size");
    assert.ok(
      peak - baseline < 64 * MiB,
      `RSS grew by ${((peak - baseline) / MiB).toFixed(1)} MiB`,
    );

    // The stored MIME is the message as sent, with its parts intact to the last boundary.
    const { head, tail } = stored;
    const headText = head.toString('latin1');
    assert.match(headText, /^Subject: A very large message\r$/m);
    assert.equal(
      /^Content-Type: multipart\/mixed; boundary="?([^"\r\n;]+)"?/m.test(headText),
      true,
      'a multipart/mixed message',
    );
    const boundary = /^Content-Type: multipart\/mixed;\s*boundary="?([^"\r\n;]+)"?/m.exec(
      headText,
    )![1];
    assert.match(
      tail.toString('latin1'),
      new RegExp(`--${boundary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}--\\r?\\n?$`),
    );
  });

  test('a message with an 11 MiB attachment is refused 554 5.6.0 attachments:too_large and leaves nothing in the spool', async () => {
    const before = spoolSnapshot(stateDir);
    const rowsBefore = (await messageRowsOf<Row>(stateDir)).size;
    const refusal = await refusalOf(
      transport.sendMail({
        from: 'Sender <sender@example.com>',
        to: 'rcpt@example.org',
        subject: 'Too large',
        text: 'one attachment over the cap',
        attachments: [
          {
            filename: 'huge.bin',
            contentType: 'application/octet-stream',
            content: generatedContent(11 * MiB, 7),
          },
        ],
      }),
    );
    // The text starts with the contract code and ends with the details (the prose between is free).
    assert.equal(refusal.responseCode, 554, refusal.response);
    assert.match(
      refusal.response ?? '',
      /^554 5\.6\.0 attachments:too_large: .+ \[attachments\.0\.content: attachments:too_large\]$/,
    );
    const afterSnap = spoolSnapshot(stateDir);
    assert.deepEqual(
      afterSnap,
      { tmpFiles: [], dayFiles: before.dayFiles },
      'no temp file and no new spool file',
    );
    assert.equal((await messageRowsOf<Row>(stateDir)).size, rowsBefore, 'no new index row');
  });

  test('attachments of 9 MiB each, 27 MiB together, are refused 554 5.6.0 attachments:total_too_large and leave nothing in the spool', async () => {
    const before = spoolSnapshot(stateDir);
    const rowsBefore = (await messageRowsOf<Row>(stateDir)).size;
    const refusal = await refusalOf(
      transport.sendMail({
        from: 'Sender <sender@example.com>',
        to: 'rcpt@example.org',
        subject: 'Too large together',
        text: 'three attachments, each allowed, over the total',
        attachments: [0, 1, 2].map((n) => ({
          filename: `part-${n}.bin`,
          contentType: 'application/octet-stream',
          content: generatedContent(9 * MiB, 11 + n),
        })),
      }),
    );
    assert.equal(refusal.responseCode, 554, refusal.response);
    assert.match(
      refusal.response ?? '',
      /^554 5\.6\.0 attachments:total_too_large: .+ \[attachments: attachments:total_too_large\]$/,
    );
    const afterSnap = spoolSnapshot(stateDir);
    assert.deepEqual(
      afterSnap,
      { tmpFiles: [], dayFiles: before.dayFiles },
      'no temp file and no new spool file',
    );
    assert.equal((await messageRowsOf<Row>(stateDir)).size, rowsBefore, 'no new index row');
  });

  test("four clients each sending a 39 MB text body are refused 554 5.6.0 text:too_long while the server's RSS grows by less than 64 MiB", async (t) => {
    const pid = server.child.pid!;
    const rowsBefore = (await messageRowsOf<Row>(stateDir)).size;
    const clients = [0, 1, 2, 3].map(() => transportFor(port, keys.liveKey));
    // Warm-up: every client's session and TLS set up before the baseline.
    await Promise.all(clients.map((c) => c.verify()));
    const watch = watchPeakRss(pid);
    let rss: PeakRss;
    let refusals: { responseCode: number | undefined; response: string | undefined }[];
    try {
      refusals = await Promise.all(
        clients.map((client, i) =>
          refusalOf(
            client.sendMail({
              from: 'Sender <sender@example.com>',
              to: 'rcpt@example.org',
              subject: `Long text ${i}`,
              text: generatedText(39_000_000),
              // As written: 39 MB on the wire, under SIZE (40 MiB).
              textEncoding: 'quoted-printable',
            }),
          ),
        ),
      );
    } finally {
      rss = watch.stop();
      for (const c of clients) c.close();
    }
    t.diagnostic(
      `server RSS baseline ${(rss.baseline / MiB).toFixed(1)} MiB, peak ${(rss.peak / MiB).toFixed(1)} MiB, growth ${((rss.peak - rss.baseline) / MiB).toFixed(1)} MiB`,
    );
    for (const refusal of refusals) {
      assert.equal(refusal.responseCode, 554, refusal.response);
      assert.match(
        refusal.response ?? '',
        /^554 5\.6\.0 text:too_long: .+ \[text: text:too_long\]$/,
      );
    }
    assert.ok(
      rss.peak - rss.baseline < 64 * MiB,
      `RSS grew by ${((rss.peak - rss.baseline) / MiB).toFixed(1)} MiB`,
    );
    assert.deepEqual(spoolSnapshot(stateDir).tmpFiles, [], 'no temp file left behind');
    assert.equal((await messageRowsOf<Row>(stateDir)).size, rowsBefore, 'no new index row');
  });

  test('a 3 MB html body is refused 554 5.6.0 html:too_long and leaves nothing in the spool', async () => {
    const before = spoolSnapshot(stateDir);
    const refusal = await refusalOf(
      transport.sendMail({
        from: 'Sender <sender@example.com>',
        to: 'rcpt@example.org',
        subject: 'Long html',
        html: `<p>${'h'.repeat(3_000_000)}</p>`,
      }),
    );
    assert.equal(refusal.responseCode, 554, refusal.response);
    assert.match(refusal.response ?? '', /^554 5\.6\.0 html:too_long: .+ \[html: html:too_long\]$/);
    assert.deepEqual(spoolSnapshot(stateDir), { tmpFiles: [], dayFiles: before.dayFiles });
  });

  test('a text of exactly 2,097,152 characters (accents, astral symbols, line breaks, quoted-printable) is accepted; one more character is refused text:too_long', async () => {
    // Characters as the contract counts them: code points, a line break as one.
    const line = `${'aé😀'.repeat(20)}\n`; // 61 code points, 81 UTF-16 units, 141 bytes in UTF-8
    const limit = 2_097_152;
    const whole = line.repeat(Math.floor(limit / 61));
    // nodemailer ends a text with a line break when it has none: this one ends with its own.
    const text = `${whole}${'x'.repeat(limit - [...whole].length - 1)}\n`;
    assert.equal([...text].length, limit);
    const send = (body: string) =>
      transport.sendMail({
        from: 'Sender <sender@example.com>',
        to: 'rcpt@example.org',
        subject: 'At the limit',
        text: body,
        textEncoding: 'quoted-printable',
      });
    assert.match(String((await send(text)).response), ACCEPTED_RE);
    const refusal = await refusalOf(send(`😀${text}`));
    assert.equal(refusal.responseCode, 554, refusal.response);
    assert.match(refusal.response ?? '', /^554 5\.6\.0 text:too_long: .+ \[text: text:too_long\]$/);
  });

  test('after the refusals a normal message is still accepted', async () => {
    const info = await transport.sendMail({
      from: 'Sender <sender@example.com>',
      to: 'rcpt@example.org',
      subject: 'after',
      text: 'still here',
    });
    const m = ACCEPTED_RE.exec(String(info.response));
    assert.ok(m, String(info.response));
    assert.equal((await messageRowsOf<Row>(stateDir)).get(m[1])?.status, 'queued');
  });
});
