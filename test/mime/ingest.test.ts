import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { judgeSmtpMessage } from '../../src/accept/smtpMessage.js';
import { ContractError } from '../../src/contract/errors.js';
import {
  type IngestOptions,
  ingestBufferedMessage as ingestHeldInto,
  ingestMessage as ingestStreamedInto,
} from '../../src/mime/ingest.js';
import { readWholeUpTo } from '../../src/smtp/dataPayload.js';
import { createTempFileStream, writeTempFileSync } from '../../src/spool/spool.js';
import { tempDirs } from '../support/hooks.js';

const dir = tempDirs('postern-ingest-')();

let n = 0;
type SpooledOptions = IngestOptions & { tmpPath: string };
const options = (): SpooledOptions => ({
  tmpPath: path.join(dir, `${++n}.tmp`),
  id: 'm.0000000000000000000000test',
  defaultSender: 'postern@gateway.example',
});
/** As the writer thread runs it: the rewritten bytes written to the temp file. */
const ingestBufferedMessage = (data: Buffer, opts: SpooledOptions) =>
  ingestHeldInto(data, opts, (rewritten) => writeTempFileSync(opts.tmpPath, rewritten));
/** As the accept pipeline runs it for a big message: streamed into the temp file. */
const ingestMessage = (input: Readable, opts: SpooledOptions) =>
  ingestStreamedInto(input, opts, createTempFileStream(opts.tmpPath));

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
  'bare LF line ends and a folded header': [
    'From: lf@example.com',
    'To: x@example.org',
    'Subject: folded',
    '  across lines',
    'Message-ID: <kept@example.com>',
    '',
    'LF body',
    '',
  ].join('\n'),
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
      const chunks = [data.subarray(0, 7), data.subarray(7, 60), data.subarray(60)].filter(
        (c) => c.length > 0,
      );
      const b = await ingestMessage(Readable.from(chunks), streamed);
      assert.deepEqual(readFileSync(held.tmpPath), readFileSync(streamed.tmpPath));
      assert.deepEqual(a, b);
      assert.equal(a.size, readFileSync(held.tmpPath).length);
    });
  }

  test('the rewrite drops control headers and Bcc, keeps their values, and adds <id@From domain>', async () => {
    const opts = options();
    const mail = await ingestBufferedMessage(
      Buffer.from(MESSAGES['CRLF, control headers, Bcc, no Message-ID']),
      opts,
    );
    const stored = readFileSync(opts.tmpPath, 'utf8');
    const head = stored.slice(0, stored.indexOf('\r\n\r\n'));
    assert.doesNotMatch(head, /^(Bcc|X-Service-)/im);
    assert.match(head, /^Message-ID: <m\.0000000000000000000000test@mail\.example\.com>$/m);
    assert.equal(mail.hadMessageId, false);
    assert.deepEqual(
      [...mail.control],
      [
        ['x-service-tags', 'one, two'],
        ['x-service-metadata', '{"k":"v"}'],
      ],
    );
    assert.deepEqual(mail.unknownControl, ['X-Service-Unknown']);
    assert.equal(mail.subject, 'Café');
    assert.equal(mail.textLength, 'Body line\n'.length);
    assert.deepEqual(
      mail.to?.value.map((a) => a.address),
      ['a@example.org', 'b@example.org'],
    );
  });

  test('a multipart message reports its decoded attachment size', async () => {
    const mail = await ingestBufferedMessage(
      Buffer.from(MESSAGES['multipart with an attachment']),
      options(),
    );
    assert.deepEqual(mail.attachmentSizes, [3000]);
    assert.equal(mail.htmlLength, '<p>hi</p>'.length);
  });

  test('readWholeUpTo holds a payload within the limit in one buffer that owns its memory', async () => {
    const got = await readWholeUpTo(Readable.from([Buffer.from('abc'), Buffer.from('def')]), 6);
    assert.ok('whole' in got);
    assert.equal(got.whole.toString(), 'abcdef');
    assert.equal(got.whole.byteLength, got.whole.buffer.byteLength);
  });

  test('readWholeUpTo hands a longer payload back as a stream of all of it, the bytes read so far first', async () => {
    const got = await readWholeUpTo(
      Readable.from([Buffer.from('abc'), Buffer.from('def'), Buffer.from('ghi')]),
      4,
    );
    assert.ok('stream' in got);
    const chunks: Buffer[] = [];
    for await (const c of got.stream) chunks.push(c as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'abcdefghi');
  });
});

describe('SMTP ingest: headers the rewrite and the rules must read right', () => {
  const NOW = Date.UTC(2026, 10, 24);
  const ingest = async (lines: string[]) => {
    const opts = options();
    const mail = await ingestBufferedMessage(
      Buffer.from([...lines, '', 'Body', ''].join('\r\n')),
      opts,
    );
    const stored = readFileSync(opts.tmpPath, 'latin1');
    return { mail, head: stored.slice(0, stored.indexOf('\r\n\r\n')) };
  };

  test('members of a group in To are named recipients (To), not Bcc; only the unnamed envelope recipient is Bcc', async () => {
    const { mail } = await ingest([
      'From: s@example.com',
      'To: Team: r1@example.org, R2 <r2@example.org>;',
      'Cc: Copies:;',
      'Subject: group',
    ]);
    const { facts } = judgeSmtpMessage(
      mail,
      ['r1@example.org', 'r2@example.org', 'hidden@example.net'],
      NOW,
    );
    assert.deepEqual(
      facts.to.map((m) => m.email),
      ['r1@example.org', 'r2@example.org'],
    );
    assert.deepEqual(
      facts.bcc.map((m) => m.email),
      ['hidden@example.net'],
    );
  });

  test('an added Message-ID takes the From domain when From carries a comment or a display name', async () => {
    for (const from of [
      'Name <a@example.com> (comment)',
      'a@example.com (comment)',
      '"Q, N" <a@example.com>',
    ]) {
      const { head } = await ingest([`From: ${from}`, 'To: r@example.org', 'Subject: id']);
      assert.match(head, /^Message-ID: <m\.0000000000000000000000test@example\.com>$/m, from);
    }
  });

  test('an empty Message-ID is replaced by the message id, leaving exactly one', async () => {
    const { mail, head } = await ingest([
      'From: a@example.com',
      'To: r@example.org',
      'Message-ID:   ',
      'Subject: empty id',
    ]);
    assert.equal(mail.hadMessageId, false);
    assert.deepEqual(head.match(/^Message-ID:.*$/gim), [
      'Message-ID: <m.0000000000000000000000test@example.com>',
    ]);
  });

  test('Resent-Bcc is removed like Bcc', async () => {
    const { head } = await ingest([
      'From: a@example.com',
      'To: r@example.org',
      'Resent-Bcc: hidden@example.net',
      'Bcc: other@example.net',
      'Subject: resent',
    ]);
    assert.doesNotMatch(head, /hidden@example\.net|other@example\.net/);
  });

  test('a control header given twice is refused with its field code, whatever the copies say', async () => {
    const cases: [string[], string, string][] = [
      [['X-Service-Paused: true', 'X-Service-Paused: maybe'], 'paused', 'paused:invalid_value'],
      [
        ['X-Service-Metadata: {"a":"1"}', 'X-Service-Metadata: {"a":"1"}'],
        'metadata',
        'metadata:invalid_value',
      ],
      [
        [
          'X-Service-Idempotency-Key: order-1234-aaaa',
          'X-Service-Idempotency-Key: order-1234-bbbb',
        ],
        'idempotency_key',
        'idempotency_key:invalid',
      ],
    ];
    for (const [control, field, code] of cases) {
      const { mail, head } = await ingest([
        'From: a@example.com',
        'To: r@example.org',
        'Subject: twice',
        ...control,
      ]);
      assert.doesNotMatch(head, /^X-Service-/im);
      assert.throws(
        () => judgeSmtpMessage(mail, ['r@example.org'], NOW),
        (err: unknown) =>
          err instanceof ContractError &&
          err.status === 422 &&
          err.code === code &&
          err.details?.some((d) => d.field === field && d.code === code) === true,
        code,
      );
    }
  });
});
