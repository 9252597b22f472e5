import { createWriteStream } from 'node:fs';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Headers, Joiner, Splitter, type SplitterChunk } from '@zone-eu/mailsplit';
import libmime from 'libmime';
import addressparser from 'nodemailer/lib/addressparser';
import { MailParser, type AddressObject, type AttachmentStream, type MessageText } from 'mailparser';
import { messageIdHeader } from '../accept/composeMime.js';
import { headerBlockEnd } from '../mime/headerBlock.js';
import { writeTempFileSync } from '../spool/spool.js';
import { CONTROL_HEADERS, type ControlHeader } from './controlHeaders.js';

export interface ParsedMail {
  from: AddressObject | undefined;
  to: AddressObject | undefined;
  cc: AddressObject | undefined;
  replyTo: AddressObject | undefined;
  subject: string | undefined;
  text: string | undefined;
  html: string | undefined;
  /** Decoded size of each attachment (inline parts included), in order. */
  attachmentSizes: number[];
  control: Map<ControlHeader, string>;
  /** `X-Service-*` headers that are not control headers (refused as reserved). */
  unknownControl: string[];
  /** Control headers given more than once (refused: which copy was meant is unknowable). */
  duplicateControl: ControlHeader[];
  /** The message came with a non-empty Message-ID (else one was added). */
  hadMessageId: boolean;
  /** Bytes of the rewritten message as stored. */
  size: number;
}

export interface IngestOptions {
  /** Where the rewritten message is written (a spool temp file, created exclusively). */
  tmpPath: string;
  /** A retired spool file to write it into instead of a new one (held messages only: Spool.retire). */
  reusePath?: string;
  /** The message's id: an added Message-ID is `<id@domain of From>`. */
  id: string;
  /** The address whose domain an added Message-ID takes when From has none. */
  defaultSender: string;
}

type RootHeaderFacts = Pick<ParsedMail, 'control' | 'unknownControl' | 'duplicateControl' | 'hadMessageId'>;
type BodyFacts = Omit<ParsedMail, keyof RootHeaderFacts | 'size'>;

/** The first address of a From header (display names, comments and groups allowed), if any. */
function fromAddress(value: string): string | undefined {
  return addressparser(value, { flatten: true }).find((a) => a.address.includes('@'))?.address;
}

const isControl = (key: string): key is ControlHeader => (CONTROL_HEADERS as readonly string[]).includes(key);

/**
 * Rewrites the top-level header block in place: control headers and any Bcc header removed
 * (their values kept for the rules), a Message-ID added if missing.
 */
function rewriteRootHeaders(headers: Headers, opts: IngestOptions): RootHeaderFacts {
  const control = new Map<ControlHeader, string>();
  const unknownControl: string[] = [];
  const duplicateControl: ControlHeader[] = [];
  for (const line of headers.getList()) {
    const key = line.key.toLowerCase();
    if (!key.startsWith('x-service-')) continue;
    if (isControl(key)) {
      // A second copy is refused, not ignored: which one a client meant is anyone's guess.
      if (control.has(key)) {
        if (!duplicateControl.includes(key)) duplicateControl.push(key);
        continue;
      }
      // Clients encode non-ASCII or JSON-ish values as RFC 2047 words: judge the text itself.
      control.set(key, libmime.decodeWords(headers.getFirst(key)));
    } else if (!unknownControl.some((u) => u.toLowerCase() === key)) {
      unknownControl.push(line.line.slice(0, line.line.indexOf(':')).trim());
    }
  }
  for (const key of new Set(headers.getList().map((l) => l.key.toLowerCase()))) {
    // Resent-Bcc, like Bcc, would show envelope-only recipients.
    if (key.startsWith('x-service-') || key === 'bcc' || key === 'resent-bcc') headers.remove(key);
  }
  // An empty Message-ID is no id (provider feedback is matched on it): replaced like a missing one.
  const hadMessageId = headers.getFirst('message-id').trim() !== '';
  if (!hadMessageId) {
    headers.remove('message-id');
    headers.add('Message-ID', messageIdHeader(opts.id, fromAddress(headers.getFirst('from')) ?? opts.defaultSender));
  }
  return { control, unknownControl, duplicateControl, hadMessageId };
}

/**
 * mailparser over the original bytes: the addresses, subject, bodies and attachment sizes the
 * HTTP rules need (attachments are counted as they stream by, then dropped).
 */
function watchBody(parser: MailParser): () => BodyFacts {
  const facts: BodyFacts = {
    from: undefined,
    to: undefined,
    cc: undefined,
    replyTo: undefined,
    subject: undefined,
    text: undefined,
    html: undefined,
    attachmentSizes: [],
  };
  parser.on('headers', (headers) => {
    const address = (key: string) => headers.get(key) as AddressObject | undefined;
    facts.from = address('from');
    facts.to = address('to');
    facts.cc = address('cc');
    facts.replyTo = address('reply-to');
    const subject = headers.get('subject');
    facts.subject = typeof subject === 'string' ? subject : undefined;
  });
  parser.on('data', (data: AttachmentStream | MessageText) => {
    if (data.type === 'attachment') {
      const index = facts.attachmentSizes.push(0) - 1;
      data.content.on('data', (chunk: Buffer) => (facts.attachmentSizes[index] += chunk.length));
      data.content.on('end', () => data.release?.());
    } else {
      if (typeof data.text === 'string') facts.text = data.text;
      if (typeof data.html === 'string') facts.html = data.html;
    }
  });
  return () => facts;
}

const newParser = () => new MailParser({ skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true });

/**
 * A message received whole (small enough to hold, see `smtp.in_memory_message_bytes`): the
 * same rewrite and parse as the streaming path, without a stream stage per step. Run by a
 * spool writer thread, so it writes synchronously: an async open/write/close costs the event
 * loop more than the write itself. The caller removes `tmpPath` if this fails.
 */
export async function ingestBufferedMessage(data: Buffer, opts: IngestOptions): Promise<ParsedMail> {
  // A message without an empty line is all header, as the Splitter reads it.
  const found = headerBlockEnd(data);
  const end = found < 0 ? data.length : found;
  const headers = new Headers(data.subarray(0, end));
  const root = rewriteRootHeaders(headers, opts);
  const stored = Buffer.concat([headers.build(), data.subarray(end)]);
  writeTempFileSync(opts.tmpPath, stored, opts.reusePath);
  const parser = newParser();
  const body = watchBody(parser);
  const done = new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
  });
  parser.end(data);
  await done;
  return { ...body(), ...root, size: stored.length };
}

/**
 * Reads a DATA payload into one buffer if it ends within `limit` bytes (the buffer owns its
 * memory, so it can move to a writer thread); otherwise hands back a stream of the whole
 * payload, the bytes read so far first.
 */
export function readWholeUpTo(input: Readable, limit: number): Promise<{ whole: Buffer } | { stream: Readable }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      input.off('data', onData);
      input.off('end', onEnd);
      input.off('error', reject);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size <= limit) return;
      stop();
      input.pause();
      const stream = new PassThrough();
      for (const c of chunks) stream.write(c);
      input.on('error', (err) => stream.destroy(err));
      input.pipe(stream);
      resolve({ stream });
    };
    const onEnd = () => {
      stop();
      const whole = Buffer.allocUnsafeSlow(size);
      let offset = 0;
      for (const c of chunks) offset += c.copy(whole, offset);
      resolve({ whole });
    };
    input.on('data', onData);
    input.on('end', onEnd);
    input.on('error', reject);
  });
}

/**
 * Streams one DATA payload to disk while parsing it, never holding the message whole: the
 * raw bytes go (a) through mailsplit, which rewrites the top-level header block into
 * `tmpPath`, and (b) through mailparser.
 */
export async function ingestMessage(input: Readable, opts: IngestOptions): Promise<ParsedMail> {
  let root: RootHeaderFacts | undefined;
  const rewrite = new Transform({
    objectMode: true,
    transform(chunk: SplitterChunk, _enc, done) {
      if (chunk.type === 'node' && chunk.root && chunk.headers) root = rewriteRootHeaders(chunk.headers, opts);
      done(null, chunk);
    },
  });
  const parser = newParser();
  const body = watchBody(parser);

  const toDisk = new PassThrough();
  const toParser = new PassThrough();
  input.on('data', (chunk: Buffer) => {
    const a = toDisk.write(chunk);
    const b = toParser.write(chunk);
    if (!a || !b) {
      input.pause();
      let waiting = (a ? 0 : 1) + (b ? 0 : 1);
      const resume = () => {
        if (--waiting === 0) input.resume();
      };
      if (!a) toDisk.once('drain', resume);
      if (!b) toParser.once('drain', resume);
    }
  });
  input.on('end', () => {
    toDisk.end();
    toParser.end();
  });
  input.on('error', (err) => {
    toDisk.destroy(err);
    toParser.destroy(err);
  });

  let size = 0;
  const countBytes = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      done(null, chunk);
    },
  });
  await Promise.all([
    pipeline(toDisk, new Splitter(), rewrite, new Joiner(), countBytes, createWriteStream(opts.tmpPath, { flags: 'wx', mode: 0o600 })),
    pipeline(toParser, parser),
  ]);
  // Splitter always emits the root node, even for an empty message.
  return { ...body(), ...(root ?? { control: new Map(), unknownControl: [], duplicateControl: [], hadMessageId: true }), size };
}
