import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import { QuotedPrintableDecoder } from '../../src/mime/quotedPrintable.js';

/** libqp (mailsplit's, pinned in package.json): the decoding to match, which holds a whole part. */
const libqp = createRequire(import.meta.url)('libqp') as { decode(value: Buffer): Buffer };

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (state * 1103515245 + 12345) >>> 0;
    return Math.floor((state / 2 ** 32) * n);
  };
}

/** Decodes `input` fed in the given chunk sizes (cycled). */
async function decode(input: Buffer, sizes: number[]): Promise<Buffer> {
  const decoder = new QuotedPrintableDecoder();
  const out: Buffer[] = [];
  decoder.on('data', (c: Buffer) => out.push(Buffer.from(c)));
  const ended = new Promise((resolve) => decoder.on('end', resolve));
  for (let at = 0, i = 0; at < input.length; i++) {
    const n = sizes[i % sizes.length];
    decoder.write(input.subarray(at, at + n));
    at += n;
  }
  decoder.end();
  await ended;
  return Buffer.concat(out);
}

const CASES: Record<string, string> = {
  'escapes in either case and raw 8-bit bytes': 'Caf=C3=A9 caf=c3=a9 and raw é\r\n',
  'soft breaks (CRLF and LF), with blanks a transport added after the =':
    'one long line =\r\ncontinued=\ncontinued again=  \r\nand done\r\n',
  'blanks before a line break, a CR or the end are dropped; others kept':
    'trailing   \r\nmid  dle\t\r\nbare\t\nlone \rcr\tend   ',
  'an = that is no escape is kept as written': 'a = b, =Z, =4Z, == and =\rX and =4',
  'a soft break at the very end': 'ends with a soft break=',
  'empty lines and bare line breaks': '\r\n\r\n\n\nx\r\n',
};

describe('QuotedPrintableDecoder: libqp decoding, streamed', () => {
  for (const [name, text] of Object.entries(CASES)) {
    test(`${name}: the same bytes as libqp's decode, however the input is cut`, async () => {
      const input = Buffer.from(text, 'utf8');
      const expected = libqp.decode(input);
      for (const sizes of [[input.length], [1], [2, 3], [5, 1, 7]])
        assert.deepEqual(await decode(input, sizes), expected, `chunks of ${sizes.join(', ')}`);
    });
  }

  test('random quoted-printable bodies cut at random decode as libqp decodes them whole', async () => {
    const pick = random(17);
    const tokens = [
      'a',
      'Z',
      '0',
      ' ',
      '\t',
      'é',
      '=41',
      '=c3=a9',
      '=C3=A9',
      '=z',
      '=4z',
      '==',
      '\r',
    ];
    const ends = ['\r\n', '\n', '=\r\n', '=\n', '=  \r\n', ''];
    for (let round = 0; round < 2000; round++) {
      let text = '';
      for (let line = pick(6); line > 0; line--) {
        for (let i = pick(12); i > 0; i--) text += tokens[pick(tokens.length)];
        text += ends[pick(ends.length)];
      }
      // libqp removes soft breaks before it reads escapes, so `=4=` and `1` on the next line
      // make one byte there: that is no quoted-printable, and the streaming decoder leaves it.
      if (/=[0-9a-fA-F]?=[ \t]*\r?\n/.test(text)) continue;
      const input = Buffer.from(text, 'utf8');
      const sizes = [1 + pick(8), 1 + pick(40), 1 + pick(3)];
      assert.deepEqual(await decode(input, sizes), libqp.decode(input), JSON.stringify(text));
    }
  });

  test('holds back only a few bytes: 8 MiB in 64 KiB chunks comes out as it goes in', async () => {
    const decoder = new QuotedPrintableDecoder();
    let out = 0;
    decoder.on('data', (c: Buffer) => (out += c.length));
    const line = Buffer.from(
      'A line of body text, with an escape =C3=A9 and a soft break at its end =\r\n',
    );
    const decodedLine = libqp.decode(line).length;
    const chunk = Buffer.concat(
      Array.from({ length: Math.floor((64 * 1024) / line.length) }, () => line),
    );
    const linesPerChunk = chunk.length / line.length;
    for (let i = 1; i <= 128; i++) {
      decoder.write(chunk);
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(out, i * linesPerChunk * decodedLine, `after chunk ${i}`);
    }
    decoder.end();
  });
});
