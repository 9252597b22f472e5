/**
 * Messages whose structure Postern does not take (issue 32, item 5): more MIME parts than its
 * parser reads (1,000 nodes, the message itself counted), a header block over 1 MiB, an
 * `X-Service-Metadata` value nested deeper than the send API's JSON may be. Each is the sender's
 * fault and permanent: `554 5.6.0` with the contract's code at the final dot (not `451 4.3.0
 * server_error`, which a client's queue retries for days), one `info` line without a stack,
 * nothing stored, and the session goes on. Held whole and streamed alike.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { getValue } from '../../src/store/queries.js';
import { capturedLogger } from '../support/fromAddress.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  startTestPostern,
  type TestPostern,
} from '../support/postern.js';
import { authedSession, type RawSmtp, rawMessage, rawSend } from '../support/rawSmtp.js';

const QUEUED = /^250 2\.0\.0 OK queued as m\.[0-9a-z]{26}$/;
const KiB = 1024;
/** pino's numeric levels. */
const INFO = 30;
const WARN = 40;

/** A multipart message of `parts` text/plain parts; `padBytes` of text in the first makes it big enough to be streamed. */
function manyParts(parts: number, padBytes = 0): string {
  const lines = [
    'From: sender@example.com',
    'To: rcpt@example.org',
    'Subject: many parts',
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b"',
    '',
  ];
  for (let i = 0; i < parts; i++) {
    lines.push(
      '--b',
      'Content-Type: text/plain',
      '',
      i === 0 && padBytes > 0
        ? `${'p'.repeat(76)}\r\n`.repeat(Math.ceil(padBytes / 78))
        : `part ${i}`,
    );
  }
  lines.push('--b--', '');
  return lines.join('\r\n');
}

/** `bytes` of header lines (X-Pad: …, 1,000 bytes each, CRLF included). */
function padHeaders(bytes: number): string {
  return `X-Pad: ${'z'.repeat(1000 - 'X-Pad: \r\n'.length)}\r\n`.repeat(Math.ceil(bytes / 1000));
}

describe('SMTP messages past a structure limit are refused 554 5.6.0 with the contract code, logged once at info', () => {
  let p: TestPostern;
  let keys: ProjectWithKeys;
  let client: RawSmtp | undefined;
  const { logger, lines } = capturedLogger('info');

  before(async () => {
    p = await startTestPostern({ smtp: true, logger });
    keys = await createProjectWithKeys(p.ctx, 'structure');
  });
  after(async () => {
    client?.destroy();
    await p.close();
  });
  beforeEach(async () => {
    client?.destroy();
    client = await authedSession(p.smtp.production.starttls, keys.liveKey);
  });
  const send = (message: string) =>
    rawSend(client!, 'sender@example.com', ['rcpt@example.org'], message);

  const countMessages = async () =>
    (await getValue<number>(
      p.ctx.store,
      'SELECT COUNT(*) FROM messages WHERE project_id = ?',
      keys.project.id,
    )) ?? 0;

  /**
   * Sends `message` and asserts: the reply is `554 5.6.0 <code>: …`, the server logged exactly one
   * line about it, at info, with the code and no error or stack, and stored nothing; then a good
   * message in the same session is accepted.
   */
  async function assertRefused(message: string, code: string): Promise<void> {
    const stored = await countMessages();
    const from = lines.length;
    const reply = await send(message);
    assert.match(reply, new RegExp(`^554 5\\.6\\.0 ${code}: `), reply);
    assert.ok(!/server_error/.test(reply), reply);
    const logged = lines.slice(from);
    const refusals = logged.filter((l) => l.msg === 'SMTP message refused');
    assert.equal(refusals.length, 1, JSON.stringify(logged));
    assert.equal(refusals[0].level, INFO);
    assert.equal(refusals[0].code, code);
    assert.equal(refusals[0].reply, 554);
    assert.deepEqual(
      logged.filter((l) => (l.level as number) >= WARN),
      [],
      'nothing logged at warn or error',
    );
    assert.ok(
      !JSON.stringify(logged).includes('"stack"'),
      `no stack: ${JSON.stringify(logged).slice(0, 2000)}`,
    );
    assert.equal(await countMessages(), stored, 'nothing stored');
    assert.deepEqual(
      readdirSync(path.join(p.stateDir, 'spool', 'tmp')),
      [],
      'no temp file left behind',
    );
    assert.match(await send(rawMessage()), QUEUED, 'the session goes on');
    assert.equal(await countMessages(), stored + 1);
  }

  test('1,100 MIME parts in 44 KB (held whole): 554 5.6.0 body:too_many_parts', async () => {
    const message = manyParts(1100);
    assert.ok(message.length < 64 * KiB, `${message.length} bytes`);
    await assertRefused(message, 'body:too_many_parts');
  });

  test('1,100 MIME parts in a 300 KB message (streamed): 554 5.6.0 body:too_many_parts', async () => {
    const message = manyParts(1100, 300 * KiB);
    assert.ok(message.length > 256 * KiB, `${message.length} bytes`);
    await assertRefused(message, 'body:too_many_parts');
  });

  test('the limit counts the message itself: 999 parts are accepted, 1,000 refused', async () => {
    assert.match(await send(manyParts(999)), QUEUED);
    await assertRefused(manyParts(1000), 'body:too_many_parts');
  });

  test('a top-level header block over 1 MiB: 554 5.6.0 headers:too_large', async () => {
    const message = rawMessage({ headers: [padHeaders(1100 * KiB).trimEnd()] });
    await assertRefused(message, 'headers:too_large');
  });

  test("a MIME part's header block over 1 MiB: 554 5.6.0 headers:too_large", async () => {
    const message = [
      'From: sender@example.com',
      'To: rcpt@example.org',
      'Subject: big part header',
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b"',
      '',
      '--b',
      `Content-Type: text/plain\r\n${padHeaders(1100 * KiB)}`,
      'text',
      '--b--',
      '',
    ].join('\r\n');
    await assertRefused(message, 'headers:too_large');
  });

  test('a single header line of 1.1 MB with no line break: 554 5.6.0 headers:too_large', async () => {
    await assertRefused(
      rawMessage({ headers: [`X-Long: ${'q'.repeat(1100 * KiB)}`] }),
      'headers:too_large',
    );
  });

  test('X-Service-Metadata nested 20,000 deep: 554 5.6.0 metadata:invalid_format (it overflowed the stack: 451)', async () => {
    const message = rawMessage({
      headers: [`X-Service-Metadata: ${'['.repeat(20_000)}${']'.repeat(20_000)}`],
    });
    await assertRefused(message, 'metadata:invalid_format');
  });

  test('a header block just under the limit is accepted', async () => {
    assert.match(await send(rawMessage({ headers: [padHeaders(1000 * KiB).trimEnd()] })), QUEUED);
  });
});
