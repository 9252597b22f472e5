import { Duplex, type Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { MimeNode } from '@zone-eu/mailsplit';
import FlowedDecoder from '@zone-eu/mailsplit/lib/flowed-decoder.js';
import { MailParser } from 'mailparser';
import { QuotedPrintableDecoder } from '../mime/quotedPrintable.js';
import { RECEIVED_PARSER_LIMITS } from './structureLimits.js';

/** The Message fields an SMTP body part stands for. */
export type BodyField = 'text' | 'html';

/** Which inline parts are the message's text and html, as mailparser assigns them. */
export const FIELD_OF_TYPE: Readonly<Record<string, BodyField>> = {
  'text/plain': 'text',
  // mailparser reads a delivery report's status part as text (keepDeliveryStatus off).
  'message/delivery-status': 'text',
  'text/html': 'html',
};

/** A node of mailparser's tree, as far as counting needs it (the class keeps these internal). */
interface ParserNode {
  contentType?: string;
  disposition?: string;
  isAttachment?: boolean;
  charset?: string;
  /** The part's transfer decoder: mailparser writes the raw body in and reads the text out. */
  decoder?: Duplex;
}

interface ParserInternals {
  createNode(node: MimeNode): ParserNode;
  decoder: { decodeStream(charset: string): Transform };
  /** Set when the current part's decoder has ended (mailparser waits on it at the end). */
  decoderEnded: boolean;
}

/** Whether a part in `charset` is counted as it is (UTF-8 or ASCII), with no charset decoder. */
export function isUtf8Charset(charset: string): boolean {
  return ['ascii', 'usascii', 'utf8'].includes(charset.toLowerCase().replace(/[^a-z0-9]+/g, ''));
}

const baseCreateNode = (MailParser.prototype as unknown as ParserInternals).createNode;

const CR = 0x0d;
const LF = 0x0a;
const ANY_SURROGATE = /[\uD800-\uDFFF]/;
const SURROGATE_PAIRS = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/**
 * Characters of a decoded text as the contract counts them (code points, as JSON Schema's
 * maxLength does), with its line breaks as mailparser hands them on (CRLF as one LF). Holds
 * nothing but the state a chunk boundary needs.
 */
export class CharacterCount {
  private readonly utf8 = new StringDecoder('utf8');
  private afterCr = false;
  private afterHighSurrogate = false;

  constructor(private readonly onCount: (characters: number) => void) {}

  write(chunk: Buffer | string): void {
    this.count(typeof chunk === 'string' ? chunk : this.utf8.write(chunk));
  }

  end(): void {
    this.count(this.utf8.end());
  }

  private count(s: string): void {
    if (s.length === 0) return;
    let n = s.length;
    // A CRLF is one character (the searches are native, so a plain text costs little).
    if (this.afterCr && s.charCodeAt(0) === LF) n--;
    for (let i = s.indexOf('\r\n'); i !== -1; i = s.indexOf('\r\n', i + 2)) n--;
    // A surrogate pair is one code point.
    if (this.afterHighSurrogate && isLowSurrogate(s.charCodeAt(0))) n--;
    if (ANY_SURROGATE.test(s)) n -= s.match(SURROGATE_PAIRS)?.length ?? 0;
    const last = s.charCodeAt(s.length - 1);
    this.afterCr = last === CR;
    this.afterHighSurrogate = last >= 0xd800 && last <= 0xdbff;
    this.onCount(n);
  }
}

/**
 * What mailparser is handed in place of a counted part's decoder. What it writes is decoded by
 * `steps` (transfer encoding, format=flowed, charset: those the part needs, none for a plain
 * UTF-8 part) and counted; it reads back nothing, so the part's text is never gathered. The
 * readable side ends once the count is complete.
 */
class CountedPart extends Duplex {
  private readonly first: Transform | undefined;
  private done: () => void = () => undefined;
  /** Settles once every character is counted, or the decoding failed. */
  readonly counted = new Promise<void>((resolve) => (this.done = resolve));

  constructor(
    steps: Transform[],
    private readonly count: CharacterCount,
  ) {
    super();
    this.first = steps[0];
    const last = steps[steps.length - 1];
    for (let i = 0; i < steps.length; i++) {
      steps[i].on('error', (err: Error) => {
        this.done();
        this.destroy(err);
      });
      if (i > 0) steps[i - 1].pipe(steps[i]);
    }
    last?.on('data', (chunk: Buffer | string) => count.write(chunk));
    last?.on('end', () => this.finish());
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    if (!this.first) {
      this.count.write(chunk);
      done();
    } else if (this.first.write(chunk)) done();
    else this.first.once('drain', done);
  }

  override _final(done: () => void): void {
    if (this.first) this.first.end();
    else this.finish();
    done();
  }

  override _read(): void {
    // Nothing to give: pushed null once the part is counted.
  }

  private finish(): void {
    this.count.end();
    this.done();
    this.push(null);
  }
}

/**
 * mailparser for the rules, which judge a text or html body by its presence and length only:
 * each inline text/plain (or delivery status) and text/html part is decoded exactly as
 * mailparser decodes it (transfer encoding, format=flowed, charset) and counted as it streams
 * by, never gathered. A message's text is its text parts together, its html its html parts
 * together; either is absent when no such part has a character. Past `limits`, `onOverLimit`
 * is told (once per field) while the message is still arriving. Headers, addresses and
 * attachments come from mailparser as usual; its own `text`/`html` output stays empty. It reads
 * with the structure limits of a received message (structureLimits.ts).
 */
export class CountingMailParser extends MailParser {
  readonly lengths: Record<BodyField, number> = { text: 0, html: 0 };
  readonly present: Record<BodyField, boolean> = { text: false, html: false };
  private readonly counted: Promise<void>[] = [];
  private readonly reported = new Set<BodyField>();

  constructor(
    private readonly limits: Readonly<Record<BodyField, number>>,
    private readonly onOverLimit: (field: BodyField) => void,
  ) {
    super({ skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true, ...RECEIVED_PARSER_LIMITS });
  }

  /** Resolves once every part seen so far has been counted (after the parser ends, all of them). */
  async countsComplete(): Promise<void> {
    await Promise.all(this.counted);
  }

  /**
   * mailparser's (internal) node factory, with a quoted-printable part's decoder replaced by one
   * that streams (libqp's holds the whole part), and a text or html part's decoder by a counter.
   */
  createNode(node: MimeNode): ParserNode {
    const created = baseCreateNode.call(this, node);
    if (created.decoder && node.encoding === 'quoted-printable') {
      const decoder = new QuotedPrintableDecoder();
      // As mailparser does for the decoder it made (and leaves unused now).
      decoder.on('end', () => ((this as unknown as ParserInternals).decoderEnded = true));
      created.decoder = decoder;
    }
    const field = created.contentType ? FIELD_OF_TYPE[created.contentType] : undefined;
    if (!field || !created.decoder || created.isAttachment || created.disposition !== 'inline') return created;
    // The steps mailparser applies to an inline part, in its order (see its processChunk); the
    // transfer decoder of a part in 7bit, 8bit or binary passes bytes through and is left out.
    const steps: Transform[] = node.encoding === 'base64' || node.encoding === 'quoted-printable' ? [created.decoder as Transform] : [];
    // (Its typings declare only a `data` event, though it is a Transform like the others.)
    if (node.flowed) steps.push(new FlowedDecoder({ delSp: node.delSp }) as unknown as Transform);
    const charset = created.charset || 'utf-8';
    if (!isUtf8Charset(charset)) {
      try {
        steps.push((this as unknown as ParserInternals).decoder.decodeStream(charset));
      } catch {
        // mailparser keeps such a part undecoded too
      }
    }
    const part = new CountedPart(steps, new CharacterCount((n) => this.add(field, n)));
    this.counted.push(part.counted);
    // Set by the decoder mailparser made, which this one replaces.
    part.once('end', () => ((this as unknown as ParserInternals).decoderEnded = true));
    created.decoder = part;
    return created;
  }

  private add(field: BodyField, characters: number): void {
    if (characters === 0) return;
    this.present[field] = true;
    this.lengths[field] += characters;
    if (this.lengths[field] > this.limits[field] && !this.reported.has(field)) {
      this.reported.add(field);
      this.onOverLimit(field);
    }
  }
}
