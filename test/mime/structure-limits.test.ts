/**
 * src/mime/structureLimits.ts: the header-block limit a composed message is held to, found as
 * headerBlockEnd finds the block (however the stream is cut), and the parse failures of
 * mailsplit that stand for the sender's message, not a server fault.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import { describe, test } from 'node:test';
import { Splitter } from '@zone-eu/mailsplit';
import { MailParser } from 'mailparser';
import { headerBlockEnd } from '../../src/mime/headerBlock.js';
import {
  checkHeaderBlock,
  headerBlockLimit,
  MAILSPLIT_LIMIT_MESSAGES,
  MAX_HEADER_BLOCK_BYTES,
  MessageStructureRefused,
  structureRefusal,
} from '../../src/mime/structureLimits.js';
import { seededRandom } from '../support/seededRandom.js';

/** `message` cut into pieces of 1 to `largest` bytes. */
function cut(message: Buffer, random: () => number, largest: number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let at = 0; at < message.length; ) {
    const size = 1 + Math.floor(random() * largest);
    pieces.push(message.subarray(at, at + size));
    at += size;
  }
  return pieces;
}

/** Whether the stream limit passes `message` (cut as given), and unchanged. */
async function streamPasses(pieces: Buffer[]): Promise<boolean> {
  const limit = headerBlockLimit();
  const out = buffer(limit);
  out.catch(() => undefined); // a refusal fails it too: the pipeline's error is the one judged
  try {
    await pipeline(Readable.from(pieces), limit);
  } catch (err) {
    assert.ok(err instanceof MessageStructureRefused, String(err));
    assert.equal(err.detail.code, 'headers:too_large');
    return false;
  }
  assert.deepEqual(await out, Buffer.concat(pieces));
  return true;
}

/** A message whose header block (blank line included) is `blockBytes` long, ending its lines with `eol`. */
function messageWithBlock(blockBytes: number, eol: '\r\n' | '\n'): Buffer {
  const tail = `Subject: x${eol}${eol}`;
  const filler = blockBytes - tail.length;
  const line = (n: number) => `X-P: ${'a'.repeat(n - 5 - eol.length)}${eol}`;
  const lines: string[] = [];
  let left = filler;
  while (left > 0) {
    const n = left >= 2000 ? 1000 : left >= 1000 ? left - 500 : left;
    lines.push(line(n));
    left -= n;
  }
  const message = Buffer.from(`${lines.join('')}${tail}body${eol}`);
  assert.equal(headerBlockEnd(message), blockBytes);
  return message;
}

describe('the header-block limit of a composed message', () => {
  for (const eol of ['\r\n', '\n'] as const) {
    test(`${JSON.stringify(eol)} lines: a block of exactly ${MAX_HEADER_BLOCK_BYTES} bytes passes, one byte more is refused, however the stream is cut`, async () => {
      const random = seededRandom(32);
      const fits = messageWithBlock(MAX_HEADER_BLOCK_BYTES, eol);
      const over = messageWithBlock(MAX_HEADER_BLOCK_BYTES + 1, eol);
      assert.doesNotThrow(() => checkHeaderBlock(fits));
      assert.throws(() => checkHeaderBlock(over), MessageStructureRefused);
      for (const largest of [700, 70_000, 2 * MAX_HEADER_BLOCK_BYTES]) {
        assert.equal(
          await streamPasses(cut(fits, random, largest)),
          true,
          `fits, cut up to ${largest}`,
        );
        assert.equal(
          await streamPasses(cut(over, random, largest)),
          false,
          `over, cut up to ${largest}`,
        );
      }
      // Byte by byte around the blank line.
      const aroundEnd = (message: Buffer) => {
        const end = headerBlockEnd(message);
        return [
          message.subarray(0, end - 6),
          ...cut(message.subarray(end - 6, end + 3), random, 1),
          message.subarray(end + 3),
        ];
      };
      assert.equal(await streamPasses(aroundEnd(fits)), true, 'fits, cut byte by byte at its end');
      assert.equal(await streamPasses(aroundEnd(over)), false, 'over, cut byte by byte at its end');
    });
  }

  test('the blank line is found across any cut: LF LF, LF CR LF, and a message that starts with its blank line', async () => {
    const random = seededRandom(7);
    // A body past the limit after it: passed only if the block was seen to end.
    const body = Buffer.alloc(MAX_HEADER_BLOCK_BYTES + 10, 0x78);
    for (const text of [
      'A: b\n\nbody',
      'A: b\r\n\r\nbody',
      'A: b\n\r\nbody',
      '\r\nbody',
      '\nbody',
    ]) {
      for (let i = 0; i < 20; i++)
        assert.equal(
          await streamPasses([...cut(Buffer.from(text), random, 3), body]),
          true,
          JSON.stringify(text),
        );
    }
    // Line ends that are not a blank line, cut the same ways, leave the block open.
    for (const text of ['A: b\nC: d\r\nE: \r\r\n', 'A: b\r\n \r\n']) {
      for (let i = 0; i < 20; i++)
        assert.equal(
          await streamPasses([...cut(Buffer.from(text), random, 3), body]),
          false,
          JSON.stringify(text),
        );
    }
  });

  test('a message that is all header (no blank line) is judged by its length', async () => {
    assert.equal(
      await streamPasses([Buffer.from(`A: ${'b'.repeat(MAX_HEADER_BLOCK_BYTES)}`)]),
      false,
    );
    assert.equal(await streamPasses([Buffer.from('A: b')]), true);
    assert.throws(
      () => checkHeaderBlock(Buffer.from(`A: ${'b'.repeat(MAX_HEADER_BLOCK_BYTES)}`)),
      MessageStructureRefused,
    );
  });
});

describe("mailsplit failures that are the message's fault", () => {
  /** What a splitter with these options fails `message` with. */
  async function splitterFailure(
    options: { maxHeadSize?: number; maxChildNodes?: number },
    message: string,
  ): Promise<unknown> {
    const splitter = new Splitter(options);
    splitter.resume();
    return pipeline(Readable.from([Buffer.from(message)]), splitter).then(
      () => null,
      (err: unknown) => err,
    );
  }

  test('mailsplit fails its header and node limits with EMAXLEN and the messages structureRefusal matches', async () => {
    const header = await splitterFailure(
      { maxHeadSize: 64 },
      `Subject: ${'x'.repeat(200)}\r\n\r\nbody\r\n`,
    );
    assert.equal((header as { code?: string }).code, 'EMAXLEN');
    assert.equal((header as Error).message, MAILSPLIT_LIMIT_MESSAGES.header_block);
    assert.equal(structureRefusal(header)?.detail.code, 'headers:too_large');

    const parts = Array.from(
      { length: 5 },
      (_, i) => `--b\r\nContent-Type: text/plain\r\n\r\n${i}\r\n`,
    ).join('');
    const nodes = await splitterFailure(
      { maxChildNodes: 3 },
      `Content-Type: multipart/mixed; boundary="b"\r\n\r\n${parts}--b--\r\n`,
    );
    assert.equal((nodes as { code?: string }).code, 'EMAXLEN');
    assert.equal((nodes as Error).message, MAILSPLIT_LIMIT_MESSAGES.mime_parts);
    assert.equal(structureRefusal(nodes)?.detail.code, 'body:too_many_parts');
  });

  test('any other failure stays what it is (a server fault)', () => {
    assert.equal(structureRefusal(new Error('EIO: i/o error, write')), null);
    assert.equal(
      structureRefusal(Object.assign(new Error('something new'), { code: 'EMAXLEN' })),
      null,
    );
    assert.equal(structureRefusal('not an error'), null);
  });

  test('mailparser hands maxHeadSize and maxChildNodes to its splitter (the counting parser reads with them)', () => {
    const parser = new MailParser({ maxHeadSize: 123, maxChildNodes: 45 }) as unknown as {
      splitter: { maxHeadSize: number; maxChildNodes: number };
      destroy(): void;
    };
    assert.equal(parser.splitter.maxHeadSize, 123);
    assert.equal(parser.splitter.maxChildNodes, 45);
    parser.destroy();
  });
});
