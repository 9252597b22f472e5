import { createWriteStream } from 'node:fs';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Joiner, Splitter, type SplitterChunk } from '@zone-eu/mailsplit';
import libmime from 'libmime';
import { MailParser, type AddressObject, type AttachmentStream, type MessageText } from 'mailparser';
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
  hadMessageId: boolean;
  /** Bytes of the rewritten message as stored. */
  size: number;
}

export interface IngestOptions {
  /** Where the rewritten message is streamed (a spool temp file, created exclusively). */
  tmpPath: string;
  /** Message-ID to add when the message has none, given the From header's value. */
  messageIdFor(fromHeader: string): string;
}

const isControl = (key: string): key is ControlHeader => (CONTROL_HEADERS as readonly string[]).includes(key);

/**
 * Streams one DATA payload to disk while parsing it, never holding the message whole: the
 * raw bytes go (a) through mailsplit, which rewrites the top-level header block — control
 * headers and any Bcc header removed, a Message-ID added if missing — into `tmpPath`, and
 * (b) through mailparser, which yields the addresses, subject, bodies and attachment sizes
 * the HTTP rules need (attachments are counted as they stream by, then dropped).
 */
export async function ingestMessage(input: Readable, opts: IngestOptions): Promise<ParsedMail> {
  const control = new Map<ControlHeader, string>();
  const unknownControl: string[] = [];
  let hadMessageId = true;

  const rewriteRootHeaders = new Transform({
    objectMode: true,
    transform(chunk: SplitterChunk, _enc, done) {
      if (chunk.type === 'node' && chunk.root && chunk.headers) {
        const headers = chunk.headers;
        for (const line of headers.getList()) {
          const key = line.key.toLowerCase();
          if (!key.startsWith('x-service-')) continue;
          if (isControl(key)) {
            // Clients encode non-ASCII or JSON-ish values as RFC 2047 words: judge the text itself.
            if (!control.has(key)) control.set(key, libmime.decodeWords(headers.getFirst(key)));
          } else if (!unknownControl.some((u) => u.toLowerCase() === key)) {
            unknownControl.push(line.line.slice(0, line.line.indexOf(':')).trim());
          }
        }
        for (const key of new Set(headers.getList().map((l) => l.key.toLowerCase()))) {
          if (key.startsWith('x-service-') || key === 'bcc') headers.remove(key);
        }
        if (!headers.hasHeader('message-id')) {
          hadMessageId = false;
          headers.add('Message-ID', opts.messageIdFor(headers.getFirst('from')));
        }
      }
      done(null, chunk);
    },
  });

  const parser = new MailParser({ skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true });
  const attachmentSizes: number[] = [];
  const parsed: Partial<ParsedMail> = {};
  parser.on('headers', (headers) => {
    const address = (key: string) => headers.get(key) as AddressObject | undefined;
    parsed.from = address('from');
    parsed.to = address('to');
    parsed.cc = address('cc');
    parsed.replyTo = address('reply-to');
    const subject = headers.get('subject');
    parsed.subject = typeof subject === 'string' ? subject : undefined;
  });
  parser.on('data', (data: AttachmentStream | MessageText) => {
    if (data.type === 'attachment') {
      const index = attachmentSizes.push(0) - 1;
      data.content.on('data', (chunk: Buffer) => (attachmentSizes[index] += chunk.length));
      data.content.on('end', () => data.release?.());
    } else {
      if (typeof data.text === 'string') parsed.text = data.text;
      if (typeof data.html === 'string') parsed.html = data.html;
    }
  });

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
    pipeline(toDisk, new Splitter(), rewriteRootHeaders, new Joiner(), countBytes, createWriteStream(opts.tmpPath, { flags: 'wx', mode: 0o600 })),
    pipeline(toParser, parser),
  ]);
  return {
    from: parsed.from,
    to: parsed.to,
    cc: parsed.cc,
    replyTo: parsed.replyTo,
    subject: parsed.subject,
    text: parsed.text,
    html: parsed.html,
    attachmentSizes,
    control,
    unknownControl,
    hadMessageId,
    size,
  };
}
