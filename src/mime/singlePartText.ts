import type { HeaderLine, MimeNode } from '@zone-eu/mailsplit';
import type { AddressObject } from 'mailparser';
import { CharacterCount, FIELD_OF_TYPE, CountingMailParser, isUtf8Charset, type BodyField } from './bodyText.js';
import { RECEIVED_PARSER_LIMITS } from './structureLimits.js';

/** What the rules read of a message: its addresses, subject, body lengths and attachment sizes. */
export interface BodyFacts {
  from: AddressObject | undefined;
  to: AddressObject | undefined;
  cc: AddressObject | undefined;
  replyTo: AddressObject | undefined;
  subject: string | undefined;
  /** Characters of the text body (its text/plain parts together); undefined: it has none. */
  textLength: number | undefined;
  /** Characters of the html body (its text/html parts together); undefined: it has none. */
  htmlLength: number | undefined;
  /** Decoded size of each attachment (inline parts included), in order. */
  attachmentSizes: number[];
}

/** The root headers the facts come from (mailparser processes each line on its own). */
const FACT_HEADERS = new Set(['from', 'to', 'cc', 'reply-to', 'subject']);

interface HeaderProcessing {
  processHeaders(lines: HeaderLine[]): Map<string, unknown>;
}

let headerReader: HeaderProcessing | undefined;

/**
 * mailparser's own header processing (its internal `processHeaders`, checked by
 * test/mime/parser-internals.test.ts), on a parser made once and never written to: its address
 * and subject decoding is then exactly the full parse's.
 */
function readHeaders(lines: HeaderLine[]): Map<string, unknown> {
  headerReader ??= new CountingMailParser({ text: Infinity, html: Infinity }, () => undefined) as unknown as HeaderProcessing;
  return headerReader.processHeaders(lines);
}

/**
 * The root's header lines the facts need, taken before the rewrite changes the block (it
 * touches none of them, but a later copy must not depend on that).
 */
export function factHeaderLines(root: MimeNode): HeaderLine[] {
  return root.headers ? root.headers.getList().filter((line) => FACT_HEADERS.has(line.key)) : [];
}

/**
 * The body field a message is, when it is a single text part that the full parse would count
 * byte for byte: not multipart (nor an embedded message), text/plain, text/html or a delivery
 * status (no Content-Type: text/plain), inline, in 7bit, 8bit or binary, UTF-8 or ASCII, not
 * format=flowed, with a header block within the received limit. null: any other message,
 * which takes the full parse. `root` has parsed its headers (MimeNode.parseHeaders).
 */
export function singlePartTextField(root: MimeNode, headerBytes: number): BodyField | null {
  if (headerBytes > RECEIVED_PARSER_LIMITS.maxHeadSize) return null;
  if (root.multipart) return null;
  // As mailparser's createNode: a root without a content type is text/plain.
  const type = root.contentType || 'text/plain';
  // (Own keys only: a type named like an Object member is no text part.)
  const field = Object.hasOwn(FIELD_OF_TYPE, type) ? FIELD_OF_TYPE[type] : undefined;
  if (!field) return null;
  if (root.disposition && root.disposition !== 'inline') return null;
  if (root.encoding === 'base64' || root.encoding === 'quoted-printable') return null;
  if (root.flowed) return null;
  if (!isUtf8Charset(root.charset || 'utf-8')) return null;
  return field;
}

/**
 * The facts of a message singlePartTextField took, as CountingMailParser gives them: the header
 * fields through mailparser's header processing, and the body (all of it after the header
 * block: a root part has no boundary) counted in one go, without a stream per step.
 */
export function singlePartTextFacts(lines: HeaderLine[], field: BodyField, body: Uint8Array): BodyFacts {
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
