import { PassThrough, Transform, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type Headers, Joiner, MimeNode, Splitter, type SplitterChunk } from '@zone-eu/mailsplit';
import libmime from 'libmime';
import addressparser from 'nodemailer/lib/addressparser';
import type { AddressObject, AttachmentStream, MessageText } from 'mailparser';
import type { Mailbox } from '../contract/address.js';
import { CountingMailParser, type BodyField } from './bodyText.js';
import { messageIdHeader } from './composeMime.js';
import { CONTROL_HEADERS, type ControlHeader } from './controlHeaders.js';
import { headerBlockEnd } from './headerBlock.js';
import { factHeaderLines, singlePartTextFacts, singlePartTextField, type BodyFacts } from './singlePartText.js';
import { RECEIVED_PARSER_LIMITS, structureRefusal } from './structureLimits.js';

export interface ParsedMail extends BodyFacts {
  control: Map<ControlHeader, string>;
  /** `X-Service-*` headers that are not control headers (refused as reserved). */
  unknownControl: string[];
  /** Control headers given more than once (refused: which copy was meant is unknowable). */
  duplicateControl: ControlHeader[];
  /** The message came with a non-empty Message-ID (else one was added). */
  hadMessageId: boolean;
  /** Bytes of the rewritten message as stored. */
  size: number;
  /**
   * False when reading stopped at a body over its length (`textLength`/`htmlLength` say which):
   * the facts are those seen until then, and nothing was stored whole. Such a message is refused.
   */
  complete: boolean;
}

/** The mailboxes a parsed address header names, a group's members included. */
export function mailboxesOf(obj: AddressObject | undefined): Mailbox[] {
  if (!obj) return [];
  // A group (`To: Team: a@x, b@y;`) names its members in the header as much as a plain list.
  const mailboxes = obj.value.flatMap((a) => a.group ?? [a]);
  return mailboxes.filter((a) => a.address).map((a) => (a.name ? { email: a.address!, name: a.name } : { email: a.address! }));
}

export interface IngestOptions {
  /** The message's id: an added Message-ID is `<id@domain of From>`. */
  id: string;
  /** The address whose domain an added Message-ID takes when From has none. */
  defaultSender: string;
}

type RootHeaderFacts = Pick<ParsedMail, 'control' | 'unknownControl' | 'duplicateControl' | 'hadMessageId'>;

/** A DATA payload passed `smtp.max_message_bytes` while streaming: nothing more was written. */
export class MessageOverSize extends Error {
  constructor(readonly limit: number) {
    super(`Message exceeds ${limit} bytes`);
  }
}

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

/** Longest text and html, in characters, before a streamed message stops being read. */
export type BodyMaxLength = Readonly<Record<BodyField, number>>;

const UNLIMITED_BODY: BodyMaxLength = { text: Infinity, html: Infinity };

/**
 * mailparser over the original bytes: the addresses, subject, body lengths and attachment sizes
 * the HTTP rules need (text, html and attachments are counted as they stream by, then dropped).
 * `onOverLimit` is told as soon as the text or html passes `bodyMaxLength`.
 */
function watchBody(bodyMaxLength: BodyMaxLength = UNLIMITED_BODY, onOverLimit: (field: BodyField) => void = () => undefined): {
  parser: CountingMailParser;
  /** Once the parser has ended: every part counted. */
  final: () => Promise<BodyFacts>;
  /** What was seen so far (reading stopped early). */
  soFar: () => BodyFacts;
} {
  const parser = new CountingMailParser(bodyMaxLength, onOverLimit);
  const facts: BodyFacts = {
    from: undefined,
    to: undefined,
    cc: undefined,
    replyTo: undefined,
    subject: undefined,
    textLength: undefined,
    htmlLength: undefined,
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
    if (data.type !== 'attachment') return; // the text and html were counted, not gathered
    const index = facts.attachmentSizes.push(0) - 1;
    data.content.on('data', (chunk: Buffer) => (facts.attachmentSizes[index] += chunk.length));
    data.content.on('end', () => data.release?.());
  });
  const soFar = (): BodyFacts => ({
    ...facts,
    textLength: parser.present.text ? parser.lengths.text : undefined,
    htmlLength: parser.present.html ? parser.lengths.html : undefined,
  });
  return {
    parser,
    soFar,
    final: async () => {
      await parser.countsComplete();
      return soFar();
    },
  };
}

/**
 * A message received whole (small enough to hold, see `smtp.in_memory_message_bytes`): the
 * same rewrite and parse as the streaming path, without a stream stage per step. The rewritten
 * bytes are handed to `store` before the parse (on a writer thread, a synchronous write: an
 * async open/write/close costs the event loop more than the write itself). A single text part
 * (singlePartText.ts) is not parsed at all past its header block: its body is only counted.
 * Throws MessageStructureRefused when it passes a structure limit (structureLimits.ts).
 */
export async function ingestBufferedMessage(data: Buffer, opts: IngestOptions, store: (rewritten: Buffer) => void): Promise<ParsedMail> {
  // A message without an empty line is all header, as the Splitter reads it.
  const found = headerBlockEnd(data);
  const end = found < 0 ? data.length : found;
  // The root node as the Splitter makes it: its structure read from the same header block.
  const node = new MimeNode(false, RECEIVED_PARSER_LIMITS);
  node.addHeaderChunk(data.subarray(0, end));
  node.parseHeaders();
  const headers = node.headers as Headers;
  const field = singlePartTextField(node, end);
  const factLines = field ? factHeaderLines(node) : [];
  const root = rewriteRootHeaders(headers, opts);
  const stored = Buffer.concat([headers.build(), data.subarray(end)]);
  store(stored);
  if (field) return { ...singlePartTextFacts(factLines, field, data.subarray(end)), ...root, size: stored.length, complete: true };
  // Small enough that a body over its length is simply counted to the end.
  const { parser, final } = watchBody();
  const done = new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', (err) => reject(structureRefusal(err) ?? err));
  });
  parser.end(data);
  await done;
  return { ...(await final()), ...root, size: stored.length, complete: true };
}

const NO_ROOT: RootHeaderFacts = { control: new Map(), unknownControl: [], duplicateControl: [], hadMessageId: true };

/** Where a streamed message stops being read. */
export interface IngestLimits {
  /** Bytes of the payload (MessageOverSize past them). */
  maxBytes?: number;
  /** Characters of the text or html (the message ends `complete: false` past them). */
  bodyMaxLength?: BodyMaxLength;
}

/**
 * Streams one DATA payload to `destination` while parsing it, never holding the message whole:
 * the raw bytes go (a) through mailsplit, which rewrites the top-level header block, into
 * `destination`, and (b) through mailparser. Reading stops as soon as the payload passes
 * `maxBytes` (MessageOverSize), it passes a structure limit (MessageStructureRefused), or its
 * text or html passes `bodyMaxLength` (resolved, `complete: false`); the rest of `input` is
 * then drained unread, so its sender gets an answer
 * at its final dot without one more byte stored. On failure `destination` has closed, and what
 * it wrote is the caller's to remove.
 */
export async function ingestMessage(input: Readable, opts: IngestOptions, destination: Writable, limits: IngestLimits = {}): Promise<ParsedMail> {
  const maxBytes = limits.maxBytes ?? Infinity;
  let root: RootHeaderFacts | undefined;
  const rewrite = new Transform({
    objectMode: true,
    transform(chunk: SplitterChunk, _enc, done) {
      if (chunk.type === 'node' && chunk.root && chunk.headers) root = rewriteRootHeaders(chunk.headers, opts);
      done(null, chunk);
    },
  });
  const stop = new AbortController();
  let overLimit = false;
  const body = watchBody(limits.bodyMaxLength, () => {
    overLimit = true;
    stop.abort();
  });

  const toDisk = new PassThrough();
  const toParser = new PassThrough();
  let received = 0;
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > maxBytes) {
      stop.abort(new MessageOverSize(maxBytes));
      return;
    }
    const a = toDisk.write(chunk);
    const b = toParser.write(chunk);
    if (!a || !b) {
      input.pause();
      let waiting = (a ? 0 : 1) + (b ? 0 : 1);
      const resume = () => {
        if (--waiting === 0 && !stop.signal.aborted) input.resume();
      };
      if (!a) toDisk.once('drain', resume);
      if (!b) toParser.once('drain', resume);
    }
  };
  const onEnd = () => {
    toDisk.end();
    toParser.end();
  };
  const onError = (err: Error) => stop.abort(err);
  input.on('data', onData);
  input.on('end', onEnd);
  input.on('error', onError);
  stop.signal.addEventListener('abort', () => {
    // Nothing more is written or parsed; what is still to come is read and dropped.
    input.off('data', onData);
    input.off('end', onEnd);
    input.resume();
  });

  let size = 0;
  const countBytes = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      done(null, chunk);
    },
  });
  // The first side to fail stops the other; both are waited for, and the file until it is
  // closed: a pipeline settles as soon as it is stopped, and a file still being opened then
  // would appear after the caller removed it.
  const fail = (err: unknown) => {
    if (!stop.signal.aborted) stop.abort(err);
    throw err;
  };
  const fileClosed = new Promise<void>((resolve) => destination.once('close', resolve));
  const sides = await Promise.allSettled([
    pipeline(toDisk, new Splitter(RECEIVED_PARSER_LIMITS), rewrite, new Joiner(), countBytes, destination, { signal: stop.signal }).catch(fail),
    pipeline(toParser, body.parser, { signal: stop.signal }).catch(fail),
  ]);
  // (The error listener stays: the input may still fail, a client going away mid-drain.)
  if (sides.some((side) => side.status === 'rejected')) {
    await fileClosed;
    if (overLimit) return { ...body.soFar(), ...(root ?? NO_ROOT), size, complete: false };
    // The first cause: over SIZE, the input's error, the failing side's (a structure limit passed: the sender's fault).
    throw structureRefusal(stop.signal.reason) ?? stop.signal.reason;
  }
  // Splitter always emits the root node, even for an empty message.
  return { ...(await body.final()), ...(root ?? NO_ROOT), size, complete: true };
}
