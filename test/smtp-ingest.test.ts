import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { ingestBufferedMessage, ingestMessage, readWholeUpTo, type IngestOptions } from '../src/smtp/ingest.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'postern-ingest-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
const options = (): IngestOptions => ({ tmpPath: path.join(dir, `${++n}.tmp`), id: 'm.0000000000000000000000test', defaultSender: 'postern@gateway.example' });

/** Messages whose header block ends in every way the splitter knows, with what the rewrite touches. */
const MESSAGES: Record<string, string> = {
  'CRLF, control headers, Bcc, no Message-ID': [
    'From: "Sender" <sender@mail.example.com>',
    'To: a@example.org, B <b@example.org>',
    'Bcc: hidden@example.net',
    'X-Service-Tags: one, two',
    'X-Service-Metadata: =?UTF-8?Q?=7B=22k=22=3A=22v=22=7D?=',
    'X-Service-Unknown: refused',
    'Subject: =?UTF-8?Q?Caf=C3=A9?=',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Body line',
    '',
  ].join('\r\n'),
  'bare LF line ends and a folded header': ['From: lf@example.com', 'To: x@example.org', 'Subject: folded', '  across lines', 'Message-ID: <kept@example.com>', '', 'LF body', ''].join('\n'),
  'headers only, no blank line': 'From: only@example.com\r\nTo: x@example.org\r\nSubject: no body',
  'empty (DATA then the dot at once)': '',
  'multipart with an attachment': [
    'From: mp@example.com',
    'To: x@example.org',
    'Subject: parts',
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/html; charset=utf-8',
    '',
    '<p>hi</p>',
    '--b1',
    'Content-Type: application/octet-stream',
    'Content-Disposition: attachment; filename="a.bin"',
    'Content-Transfer-Encoding: base64',
    '',
    Buffer.alloc(3000, 7).toString('base64').replace(/.{76}/g, '$&\r\n'),
    '--b1--',
    '',
  ].join('\r\n'),
};

describe('SMTP ingest: a message held whole and one streamed end the same', () => {
  for (const [name, raw] of Object.entries(MESSAGES)) {
    test(`${name}: same stored bytes, same facts`, async () => {
      const data = Buffer.from(raw);
      const held = options();
      const streamed = options();
      const a = await ingestBufferedMessage(data, held);
      // Split mid-line so the streaming path sees the header block across chunks.
      const chunks = [data.subarray(0, 7), data.subarray(7, 60), data.subarray(60)].filter((c) => c.length > 0);
      const b = await ingestMessage(Readable.from(chunks), streamed);
      assert.deepEqual(readFileSync(held.tmpPath), readFileSync(streamed.tmpPath));
      assert.deepEqual(a, b);
      assert.equal(a.size, readFileSync(held.tmpPath).length);
    });
  }

  test('the rewrite drops control headers and Bcc, keeps their values, and adds <id@From domain>', async () => {
    const opts = options();
    const mail = await ingestBufferedMessage(Buffer.from(MESSAGES['CRLF, control headers, Bcc, no Message-ID']), opts);
    const stored = readFileSync(opts.tmpPath, 'utf8');
    const head = stored.slice(0, stored.indexOf('\r\n\r\n'));
    assert.doesNotMatch(head, /^(Bcc|X-Service-)/im);
    assert.match(head, /^Message-ID: <m\.0000000000000000000000test@mail\.example\.com>$/m);
    assert.equal(mail.hadMessageId, false);
    assert.deepEqual([...mail.control], [
      ['x-service-tags', 'one, two'],
      ['x-service-metadata', '{"k":"v"}'],
    ]);
    assert.deepEqual(mail.unknownControl, ['X-Service-Unknown']);
    assert.equal(mail.subject, 'Café');
    assert.equal(mail.text, 'Body line\n');
    assert.deepEqual(
      mail.to?.value.map((a) => a.address),
      ['a@example.org', 'b@example.org'],
    );
  });

  test('a multipart message reports its decoded attachment size', async () => {
    const mail = await ingestBufferedMessage(Buffer.from(MESSAGES['multipart with an attachment']), options());
    assert.deepEqual(mail.attachmentSizes, [3000]);
    assert.equal(mail.html, '<p>hi</p>');
  });

  test('readWholeUpTo holds a payload within the limit in one buffer that owns its memory', async () => {
    const got = await readWholeUpTo(Readable.from([Buffer.from('abc'), Buffer.from('def')]), 6);
    assert.ok('whole' in got);
    assert.equal(got.whole.toString(), 'abcdef');
    assert.equal(got.whole.byteLength, got.whole.buffer.byteLength);
  });

  test('readWholeUpTo hands a longer payload back as a stream of all of it, the bytes read so far first', async () => {
    const got = await readWholeUpTo(Readable.from([Buffer.from('abc'), Buffer.from('def'), Buffer.from('ghi')]), 4);
    assert.ok('stream' in got);
    const chunks: Buffer[] = [];
    for await (const c of got.stream) chunks.push(c as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'abcdefghi');
  });
});
