/**
 * A message held whole that is a single text part skips mailparser (src/mime/singlePartText.ts):
 * its body is only counted. Each message here is ingested both ways, held (the light path when
 * it is eligible) and streamed (always mailparser's full parse), and must store the same bytes,
 * give the same facts and be judged the same by the rules (the index row's fields come from
 * those facts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { MimeNode } from '@zone-eu/mailsplit';
import { judgeSmtpMessage } from '../../src/accept/smtpMessage.js';
import { ContractError } from '../../src/contract/errors.js';
import { headerBlockEnd } from '../../src/mime/headerBlock.js';
import { ingestBufferedMessage, ingestMessage, type ParsedMail } from '../../src/mime/ingest.js';
import { singlePartTextField } from '../../src/mime/singlePartText.js';
import { RECEIVED_PARSER_LIMITS } from '../../src/mime/structureLimits.js';
import { createTempFileStream, writeTempFileSync } from '../../src/spool/spool.js';
import { tempDirs } from '../support/hooks.js';

const dir = tempDirs('postern-single-part-')();
let n = 0;
const options = () => ({
  tmpPath: path.join(dir, `${++n}.tmp`),
  id: 'm.0000000000000000000000test',
  defaultSender: 'postern@gateway.example',
});
const NOW = Date.UTC(2026, 10, 29);
const ENVELOPE = ['r@example.org', 'b@example.org', 'hidden@example.net'];

const head = (...lines: string[]) =>
  [
    'From: "Sender" <s@example.com>',
    'To: r@example.org, B <b@example.org>',
    'Subject: plain',
    ...lines,
  ].join('\r\n');
const msg = (header: string, body: string | Buffer, eol = '\r\n') =>
  Buffer.concat([
    Buffer.from(`${header}${eol}${eol}`, 'latin1'),
    typeof body === 'string' ? Buffer.from(body) : body,
  ]);
const lorem = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\r\n';

/** Each message, and whether the light path takes it (true) or it goes to mailparser (false). */
const CORPUS: [string, Buffer, boolean][] = [
  [
    'the bench message: 2 KB of UTF-8 text/plain',
    msg(head('MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8'), lorem.repeat(24)),
    true,
  ],
  ['no Content-Type at all', msg(head(), 'just text\r\n'), true],
  [
    'text/html',
    msg(head('Content-Type: text/html; charset="UTF-8"'), '<p>hi <b>there</b></p>\r\n'),
    true,
  ],
  [
    'a delivery status, read as text',
    msg(head('Content-Type: message/delivery-status'), 'Reporting-MTA: dns; mx.example\r\n'),
    true,
  ],
  [
    '8-bit UTF-8 body, 8bit encoding, emoji and a lone CR',
    msg(
      head('Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 8bit'),
      'Café 😀 naïve\r\nline\rtwo\r\n',
    ),
    true,
  ],
  [
    'invalid UTF-8 in the body',
    msg(
      head('Content-Type: text/plain; charset=utf-8'),
      Buffer.from([0x61, 0xe2, 0x82, 0x0d, 0x0a, 0xff, 0xfe, 0x62, 0xf0, 0x9f, 0x98, 0x0d, 0x0a]),
    ),
    true,
  ],
  [
    'invalid UTF-8 and 8-bit bytes in the headers',
    msg(
      `From: =?utf-8?q?Ren=C3=A9?= <s@example.com>\r\nTo: "J\xe9r\xf4me" <r@example.org>\r\nSubject: caf\xe9 \xff\xfe`,
      'body\r\n',
    ),
    true,
  ],
  [
    'encoded words, folded long headers, a group and Reply-To',
    msg(
      [
        'From: =?UTF-8?B?0J/RgNC40LLQtdGC?= <s@example.com>',
        `To: Team: r@example.org,\r\n  ${Array.from({ length: 40 }, (_, i) => `Person ${i} <p${i}@example.org>`).join(',\r\n  ')};`,
        'Cc: B <b@example.org>',
        'Reply-To: "Support, Team" <help@example.com>',
        `Subject: =?UTF-8?Q?Caf=C3=A9?= ${'long words '.repeat(120)}\r\n\tcontinued`,
        `X-Long: ${'x'.repeat(5000)}`,
      ].join('\r\n'),
      'text\r\n',
    ),
    true,
  ],
  [
    'two To headers',
    msg(
      'From: s@example.com\r\nTo: r@example.org\r\nTo: b@example.org\r\nSubject: two',
      'text\r\n',
    ),
    true,
  ],
  ['no From, no Subject', msg('To: r@example.org', 'text\r\n'), true],
  ['bare LF line ends', msg(head().replace(/\r\n/g, '\n'), 'one\ntwo\n', '\n'), true],
  ['headers only, no blank line', Buffer.from(head()), true],
  ['empty body', msg(head(), ''), true],
  [
    'an inline disposition',
    msg(head('Content-Type: text/plain', 'Content-Disposition: inline'), 'text\r\n'),
    true,
  ],
  [
    'charset us-ascii, spelt oddly',
    msg(head('Content-Type: text/plain; charset=US_ASCII'), 'text\r\n'),
    true,
  ],
  [
    'a Content-Type with a comment (mailsplit keeps it in the type)',
    msg(head('Content-Type: text/plain (the text); charset=utf-8'), 'text\r\n'),
    false,
  ],
  [
    'control headers, Bcc and an empty Message-ID',
    msg(
      head(
        'Bcc: hidden@example.net',
        'Message-ID:  ',
        'X-Service-Tags: a, b',
        'X-Service-Metadata: {"k":"v"}',
        'X-Service-Nope: 1',
      ),
      'text\r\n',
    ),
    true,
  ],
  [
    'a body of NULs and control bytes',
    msg(head(), Buffer.from([0, 1, 2, 0x0d, 0x0a, 0x1b, 0x7f])),
    true,
  ],
  ['a text over the contract length', msg(head(), 'x'.repeat(260 * 1024)), true],
  [
    'Latin-1 text',
    msg(
      head('Content-Type: text/plain; charset=iso-8859-1', 'Content-Transfer-Encoding: 8bit'),
      Buffer.from('caf\xe9 na\xefve\r\n', 'latin1'),
    ),
    false,
  ],
  [
    'quoted-printable',
    msg(
      head(
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: quoted-printable',
      ),
      'Caf=C3=A9 =\r\nsoft break\r\n',
    ),
    false,
  ],
  [
    'base64',
    msg(
      head('Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: base64'),
      `${Buffer.from('<p>hi</p>').toString('base64')}\r\n`,
    ),
    false,
  ],
  [
    'format=flowed',
    msg(
      head('Content-Type: text/plain; charset=utf-8; format=flowed; delsp=yes'),
      'soft \r\nwrap\r\n',
    ),
    false,
  ],
  [
    'text as an attachment',
    msg(
      head('Content-Type: text/plain', 'Content-Disposition: attachment; filename="a.txt"'),
      'text\r\n',
    ),
    false,
  ],
  [
    'an unknown disposition',
    msg(head('Content-Type: text/plain', 'Content-Disposition: weird'), 'text\r\n'),
    false,
  ],
  ['a type named like an Object member', msg(head('Content-Type: constructor'), 'text\r\n'), false],
  [
    'application/octet-stream',
    msg(head('Content-Type: application/octet-stream'), 'bytes\r\n'),
    false,
  ],
  [
    'an embedded message',
    msg(
      head('Content-Type: message/rfc822', 'Content-Disposition: inline'),
      'From: x@example.com\r\nSubject: inner\r\n\r\ninner text\r\n',
    ),
    false,
  ],
  [
    'multipart/alternative',
    msg(
      head('MIME-Version: 1.0', 'Content-Type: multipart/alternative; boundary="b"'),
      '--b\r\nContent-Type: text/plain\r\n\r\ntext\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n--b--\r\n',
    ),
    false,
  ],
  [
    'multipart with an attachment',
    msg(
      head('Content-Type: multipart/mixed; boundary=b1'),
      `--b1\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename="a.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\n${Buffer.alloc(3000, 7).toString('base64').replace(/.{76}/g, '$&\r\n')}\r\n--b1--\r\n`,
    ),
    false,
  ],
];

/** The rules' verdict on a message: its facts, or the refusal (or failure) they give. */
function judged(mail: ParsedMail): unknown {
  try {
    return judgeSmtpMessage(mail, ENVELOPE, NOW);
  } catch (err) {
    return err instanceof ContractError
      ? { code: err.code, details: err.details }
      : { failure: String(err) };
  }
}

function rootOf(data: Buffer): { node: MimeNode; end: number } {
  const found = headerBlockEnd(data);
  const end = found < 0 ? data.length : found;
  const node = new MimeNode(false, RECEIVED_PARSER_LIMITS);
  node.addHeaderChunk(data.subarray(0, end));
  node.parseHeaders();
  return { node, end };
}

describe('SMTP ingest: a single text part is counted, not parsed, and ends as the full parse does', () => {
  for (const [name, data, light] of CORPUS) {
    test(`${name}: ${light ? 'light path' : 'full parse'}, same stored bytes, facts and verdict as streamed`, async () => {
      const { node, end } = rootOf(data);
      assert.equal(singlePartTextField(node, end) !== null, light, 'taken by the light path');
      const held = options();
      const streamed = options();
      const a = await ingestBufferedMessage(data, held, (rewritten) =>
        writeTempFileSync(held.tmpPath, rewritten),
      );
      const chunks = [data.subarray(0, 7), data.subarray(7, 60), data.subarray(60)].filter(
        (c) => c.length > 0,
      );
      const b = await ingestMessage(
        Readable.from(chunks),
        streamed,
        createTempFileStream(streamed.tmpPath),
      );
      assert.deepEqual(readFileSync(held.tmpPath), readFileSync(streamed.tmpPath));
      assert.deepEqual(a, b);
      assert.deepEqual(judged(a), judged(b));
    });
  }

  test('a header block past the received limit is left to the full parse, which refuses it', () => {
    const { node } = rootOf(msg(head(), 'text\r\n'));
    assert.notEqual(singlePartTextField(node, RECEIVED_PARSER_LIMITS.maxHeadSize), null);
    assert.equal(singlePartTextField(node, RECEIVED_PARSER_LIMITS.maxHeadSize + 1), null);
  });
});
