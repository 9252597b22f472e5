import type { HeaderLine, MimeNode } from '@zone-eu/mailsplit';
import type { AddressObject } from 'mailparser';
import {
  type BodyField,
  CharacterCount,
  CountingMailParser,
  FIELD_OF_TYPE,
  isUtf8Charset,
} from './bodyText.js';
import { RECEIVED_PARSER_LIMITS } from './structureLimits.js';

export interface BodyFacts {
  from: AddressObject | undefined;
  to: AddressObject | undefined;
  cc: AddressObject | undefined;
  replyTo: AddressObject | undefined;
  subject: string | undefined;
  /** Its text/plain parts together; undefined: it has none. */
  textLength: number | undefined;
  htmlLength: number | undefined;
  /** Inline parts included, in order. */
  attachmentSizes: number[];
}

const FACT_HEADERS = new Set(['from', 'to', 'cc', 'reply-to', 'subject']);

interface HeaderProcessing {
  processHeaders(lines: HeaderLine[]): Map<string, unknown>;
}

let headerReader: HeaderProcessing | undefined;

/** mailparser's internal `processHeaders` on a parser never written to, so decoding is exactly the full parse's. */
function readHeaders(lines: HeaderLine[]): Map<string, unknown> {
  headerReader ??= new CountingMailParser(
    { text: Infinity, html: Infinity },
    () => undefined,
  ) as unknown as HeaderProcessing;
  return headerReader.processHeaders(lines);
}

/** Taken before the rewrite changes the block (it touches none of them, but a later copy must not depend on that). */
export function factHeaderLines(root: MimeNode): HeaderLine[] {
  return root.headers ? root.headers.getList().filter((line) => FACT_HEADERS.has(line.key)) : [];
}

/** The body field when the message is a single text part the full parse would count byte for byte; null: take the full parse. */
export function singlePartTextField(root: MimeNode, headerBytes: number): BodyField | null {
  if (headerBytes > RECEIVED_PARSER_LIMITS.maxHeadSize) return null;
  if (root.multipart) return null;
  // As mailparser's createNode: a root without a content type is text/plain.
  const type = root.contentType || 'text/plain';
  // Own keys only: a type named like an Object member is no text part.
  const field = Object.hasOwn(FIELD_OF_TYPE, type) ? FIELD_OF_TYPE[type] : undefined;
  if (!field) return null;
  if (root.disposition && root.disposition !== 'inline') return null;
  if (root.encoding === 'base64' || root.encoding === 'quoted-printable') return null;
  if (root.flowed) return null;
  if (!isUtf8Charset(root.charset || 'utf-8')) return null;
  return field;
}

/** As CountingMailParser gives them, counted in one go without a stream per step. */
export function singlePartTextFacts(
  lines: HeaderLine[],
  field: BodyField,
  body: Uint8Array,
): BodyFacts {
  const headers = readHeaders(lines);
  const address = (key: string) => headers.get(key) as AddressObject | undefined;
  const subject = headers.get('subject');
  let characters = 0;
  const count = new CharacterCount((n) => (characters += n));
  count.write(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  count.end();
  const length = characters > 0 ? characters : undefined;
  return {
    from: address('from'),
    to: address('to'),
    cc: address('cc'),
    replyTo: address('reply-to'),
    subject: typeof subject === 'string' ? subject : undefined,
    textLength: field === 'text' ? length : undefined,
    htmlLength: field === 'html' ? length : undefined,
    attachmentSizes: [],
  };
}
