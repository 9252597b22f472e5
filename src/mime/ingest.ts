import { PassThrough, type Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type Headers, Joiner, MimeNode, Splitter, type SplitterChunk } from '@zone-eu/mailsplit';
import libmime from 'libmime';
import type { AddressObject, AttachmentStream, MessageText } from 'mailparser';
import addressparser from 'nodemailer/lib/addressparser';
import type { Mailbox } from '../contract/address.js';
import { type BodyField, CountingMailParser } from './bodyText.js';
import { messageIdHeader } from './composeMime.js';
import { CONTROL_HEADERS, type ControlHeader } from './controlHeaders.js';
import { headerBlockEnd } from './headerBlock.js';
import {
  type BodyFacts,
  factHeaderLines,
  singlePartTextFacts,
  singlePartTextField,
} from './singlePartText.js';
import { RECEIVED_PARSER_LIMITS, structureRefusal } from './structureLimits.js';

export interface ParsedMail extends BodyFacts {
  control: Map<ControlHeader, string>;
  unknownControl: string[];
  /** Refused: which copy was meant is unknowable. */
  duplicateControl: ControlHeader[];
  /** Else one was added. */
  hadMessageId: boolean;
  size: number;
  /** False when reading stopped at a body over its length: nothing was stored whole, and the message is refused. */
  complete: boolean;
}

export function mailboxesOf(obj: AddressObject | undefined): Mailbox[] {
  if (!obj) return [];
  // A group (`To: Team: a@x, b@y;`) names its members in the header as much as a plain list.
  const mailboxes = obj.value.flatMap((a) => a.group ?? [a]);
  return mailboxes
    .filter((a) => a.address)
    .map((a) => (a.name ? { email: a.address!, name: a.name } : { email: a.address! }));
}

export interface IngestOptions {
  /** An added Message-ID is `<id@domain of From>`. */
  id: string;
  defaultSender: string;
}

type RootHeaderFacts = Pick<
  ParsedMail,
  'control' | 'unknownControl' | 'duplicateControl' | 'hadMessageId'
>;

export class MessageOverSize extends Error {
  constructor(readonly limit: number) {
    super(`Message exceeds ${limit} bytes`);
  }
}

function fromAddress(value: string): string | undefined {
  return addressparser(value, { flatten: true }).find((a) => a.address.includes('@'))?.address;
}

const isControl = (key: string): key is ControlHeader =>
  (CONTROL_HEADERS as readonly string[]).includes(key);

/** Control headers and any Bcc removed (their values kept for the rules), a Message-ID added if missing. */
function rewriteRootHeaders(headers: Headers, opts: IngestOptions): RootHeaderFacts {
  const control = new Map<ControlHeader, string>();
  const unknownControl: string[] = [];
  const duplicateControl: ControlHeader[] = [];
  for (const line of headers.getList()) {
    const key = line.key.toLowerCase();
    if (!key.startsWith('x-service-')) continue;
    if (isControl(key)) {
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
    headers.add(
      'Message-ID',
      messageIdHeader(opts.id, fromAddress(headers.getFirst('from')) ?? opts.defaultSender),
    );
  }
  return { control, unknownControl, duplicateControl, hadMessageId };
}

export type BodyMaxLength = Readonly<Record<BodyField, number>>;

const UNLIMITED_BODY: BodyMaxLength = { text: Infinity, html: Infinity };

/** mailparser over the original bytes, for the facts the HTTP rules need; bodies are counted as they stream by, then dropped. */
function watchBody(
  bodyMaxLength: BodyMaxLength = UNLIMITED_BODY,
  onOverLimit: (field: BodyField) => void = () => undefined,
): {
  parser: CountingMailParser;
  final: () => Promise<BodyFacts>;
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
    if (data.type !== 'attachment') return;
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
 * A message received whole: the same rewrite and parse without a stream stage per step, handed to `store` synchronously
 * (an async open/write/close costs the event loop more than the write). A single text part is only counted.
 */
export async function ingestBufferedMessage(
  data: Buffer,
  opts: IngestOptions,
  store: (rewritten: Buffer) => void,
): Promise<ParsedMail> {
  // A message without an empty line is all header, as the Splitter reads it.
  const found = headerBlockEnd(data);
  const end = found < 0 ? data.length : found;
  const node = new MimeNode(false, RECEIVED_PARSER_LIMITS);
  node.addHeaderChunk(data.subarray(0, end));
  node.parseHeaders();
  const headers = node.headers as Headers;
  const field = singlePartTextField(node, end);
  const factLines = field ? factHeaderLines(node) : [];
  const root = rewriteRootHeaders(headers, opts);
  const stored = Buffer.concat([headers.build(), data.subarray(end)]);
  store(stored);
  if (field)
    return {
      ...singlePartTextFacts(factLines, field, data.subarray(end)),
      ...root,
      size: stored.length,
      complete: true,
    };
  const { parser, final } = watchBody();
  const done = new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', (err) => reject(structureRefusal(err) ?? err));
  });
  parser.end(data);
  await done;
  return { ...(await final()), ...root, size: stored.length, complete: true };
}

const NO_ROOT: RootHeaderFacts = {
  control: new Map(),
  unknownControl: [],
  duplicateControl: [],
  hadMessageId: true,
};

export interface IngestLimits {
  maxBytes?: number;
  bodyMaxLength?: BodyMaxLength;
}

/**
 * Streams one DATA payload through mailsplit (rewriting the root headers) into `destination` and through mailparser, never
 * whole. Past a limit the rest is drained unread, so the sender gets an answer at its final dot. On failure the caller removes the file.
 */
export async function ingestMessage(
  input: Readable,
  opts: IngestOptions,
  destination: Writable,
  limits: IngestLimits = {},
): Promise<ParsedMail> {
  const maxBytes = limits.maxBytes ?? Infinity;
  let root: RootHeaderFacts | undefined;
  const rewrite = new Transform({
    objectMode: true,
    transform(chunk: SplitterChunk, _enc, done) {
      if (chunk.type === 'node' && chunk.root && chunk.headers)
        root = rewriteRootHeaders(chunk.headers, opts);
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
  // Both sides are waited for, and the file until closed: a file still being opened would appear after the caller removed it.
  const fail = (err: unknown) => {
    if (!stop.signal.aborted) stop.abort(err);
    throw err;
  };
  const fileClosed = new Promise<void>((resolve) => destination.once('close', resolve));
  const sides = await Promise.allSettled([
    pipeline(
      toDisk,
      new Splitter(RECEIVED_PARSER_LIMITS),
      rewrite,
      new Joiner(),
      countBytes,
      destination,
      { signal: stop.signal },
    ).catch(fail),
    pipeline(toParser, body.parser, { signal: stop.signal }).catch(fail),
  ]);
  // The error listener stays: the input may still fail, a client going away mid-drain.
  if (sides.some((side) => side.status === 'rejected')) {
    await fileClosed;
    if (overLimit) return { ...body.soFar(), ...(root ?? NO_ROOT), size, complete: false };
    throw structureRefusal(stop.signal.reason) ?? stop.signal.reason;
  }
  // Splitter always emits the root node, even for an empty message.
  return { ...(await body.final()), ...(root ?? NO_ROOT), size, complete: true };
}
