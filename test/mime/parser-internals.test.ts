/**
 * What src/mime/bodyText.ts reaches into in mailparser (the node factory `createNode`, the node it
 * returns, the parser's `decoder.decodeStream`, and the `decoderEnded` flag its end waits on),
 * checked against the installed library. A failure here means an upgrade changed what the
 * counting parser assumes: re-read bodyText.ts against the new library, then move the exact pin
 * in package.json.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Transform } from 'node:stream';
import { describe, test } from 'node:test';
import { MailParser } from 'mailparser';
import { repoRoot } from '../support/paths.js';

type Method = (...args: unknown[]) => unknown;
const prototype = MailParser.prototype as unknown as Record<string, Method>;

/** The factory's source without comments and with its whitespace collapsed. */
const code = (method: Method) =>
  method
    .toString()
    .replace(/\/\/[^\n]*/g, '')
    .replace(/\s+/g, ' ');

describe('mailparser is pinned, and the internals the counting parser uses have the shape it assumes', () => {
  test('package.json pins mailparser to one exact version: the one installed and the one locked', () => {
    const manifest = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const lock = JSON.parse(readFileSync(path.join(repoRoot, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dependencies?: Record<string, string> }>;
    };
    const installed = (
      createRequire(import.meta.url)('mailparser/package.json') as { version: string }
    ).version;
    const pinned = manifest.dependencies.mailparser;
    assert.match(pinned, /^\d+\.\d+\.\d+$/, 'an exact version, no range');
    assert.equal(installed, pinned);
    assert.equal(lock.packages['']?.dependencies?.mailparser, pinned);
    assert.equal(lock.packages['node_modules/mailparser']?.version, pinned);
  });

  test('createNode takes the mailsplit node and gives a text part a transfer decoder that sets decoderEnded when it ends', () => {
    assert.equal(typeof prototype.createNode, 'function');
    assert.equal(prototype.createNode.length, 1);
    const source = code(prototype.createNode);
    for (const part of [
      'node.getDecoder()',
      "decoder.on('end'",
      'this.decoderEnded = true',
      'newNode.decoder = decoder',
      'newNode.isAttachment',
      'newNode.disposition',
      'newNode.charset = charset',
    ]) {
      assert.ok(source.includes(part), `createNode still does ${part}`);
    }
  });

  test('a parser has decoder.decodeStream(charset), a Transform, and its clean-up waits on the current node decoder unless decoderEnded', () => {
    const parser = new MailParser() as unknown as {
      decoder: { decodeStream(charset: string): unknown };
      destroy(): void;
    };
    assert.equal(typeof parser.decoder?.decodeStream, 'function');
    assert.ok(parser.decoder.decodeStream('iso-8859-1') instanceof Transform);
    parser.destroy();
    assert.ok(
      code(prototype.cleanup).includes('this.curnode.decoder.readable && !this.decoderEnded'),
      'cleanup waits on the node decoder unless decoderEnded',
    );
  });

  test('processHeaders(lines) maps a root header list to the values the headers event hands on, without touching the parser (singlePartText.ts)', () => {
    const parser = new MailParser() as unknown as {
      processHeaders(lines: { key: string; line: string }[]): Map<string, unknown>;
      destroy(): void;
    };
    assert.equal(typeof parser.processHeaders, 'function');
    const headers = parser.processHeaders([
      { key: 'from', line: 'From: =?UTF-8?Q?Ren=C3=A9?= <r@example.com>' },
      { key: 'subject', line: 'Subject: =?UTF-8?Q?Caf=C3=A9?=' },
    ]);
    assert.deepEqual(
      (headers.get('from') as { value: { address: string; name: string }[] }).value,
      [{ address: 'r@example.com', name: 'René' }],
    );
    assert.equal(headers.get('subject'), 'Café');
    assert.equal(
      code(prototype.processChunk).includes("this.emit('headers', node.headers)"),
      true,
      'the headers event hands on the processed map',
    );
    parser.destroy();
  });
});
