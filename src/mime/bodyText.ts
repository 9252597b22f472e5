import { Duplex, type Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { MimeNode } from '@zone-eu/mailsplit';
import FlowedDecoder from '@zone-eu/mailsplit/lib/flowed-decoder.js';
import { MailParser } from 'mailparser';
import { QuotedPrintableDecoder } from '../mime/quotedPrintable.js';
import { RECEIVED_PARSER_LIMITS } from './structureLimits.js';

export type BodyField = 'text' | 'html';

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
  decoder?: Duplex;
}

interface ParserInternals {
  createNode(node: MimeNode): ParserNode;
  decoder: { decodeStream(charset: string): Transform };
  decoderEnded: boolean;
}

export function isUtf8Charset(charset: string): boolean {
  return ['ascii', 'usascii', 'utf8'].includes(charset.toLowerCase().replace(/[^a-z0-9]+/g, ''));
}

const baseCreateNode = (MailParser.prototype as unknown as ParserInternals).createNode;

const CR = 0x0d;
const LF = 0x0a;
const ANY_SURROGATE = /[\uD800-\uDFFF]/;
const SURROGATE_PAIRS = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** Characters as the contract counts them (code points, CRLF as one LF, as mailparser hands them on). */
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
    if (this.afterCr && s.charCodeAt(0) === LF) n--;
    for (let i = s.indexOf('\r\n'); i !== -1; i = s.indexOf('\r\n', i + 2)) n--;
    if (this.afterHighSurrogate && isLowSurrogate(s.charCodeAt(0))) n--;
    if (ANY_SURROGATE.test(s)) n -= s.match(SURROGATE_PAIRS)?.length ?? 0;
    const last = s.charCodeAt(s.length - 1);
    this.afterCr = last === CR;
    this.afterHighSurrogate = last >= 0xd800 && last <= 0xdbff;
    this.onCount(n);
  }
}

/** Handed to mailparser in place of a counted part's decoder: decodes by `steps` and counts, gathers nothing. */
class CountedPart extends Duplex {
  private readonly first: Transform | undefined;
  private done: () => void = () => undefined;
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

  override _read(): void {}

  private finish(): void {
    this.count.end();
    this.done();
    this.push(null);
  }
}

/**
 * mailparser whose text and html parts are counted as they stream by, never gathered: the rules only
 * judge their presence and length. `onOverLimit` is told while the message still arrives.
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
    super({
      skipHtmlToText: true,
      skipTextToHtml: true,
      skipTextLinks: true,
      skipImageLinks: true,
      ...RECEIVED_PARSER_LIMITS,
    });
  }

  async countsComplete(): Promise<void> {
    await Promise.all(this.counted);
  }

  /** mailparser's internal node factory: a streaming QP decoder (libqp holds the whole part), and a counter for text parts. */
  createNode(node: MimeNode): ParserNode {
    const created = baseCreateNode.call(this, node);
    if (created.decoder && node.encoding === 'quoted-printable') {
      const decoder = new QuotedPrintableDecoder();
      decoder.on('end', () => ((this as unknown as ParserInternals).decoderEnded = true));
      created.decoder = decoder;
    }
    const field = created.contentType ? FIELD_OF_TYPE[created.contentType] : undefined;
    if (!field || !created.decoder || created.isAttachment || created.disposition !== 'inline')
      return created;
    // mailparser's order (its processChunk); 7bit, 8bit and binary pass through and are left out.
    const steps: Transform[] =
      node.encoding === 'base64' || node.encoding === 'quoted-printable'
        ? [created.decoder as Transform]
        : [];
    // Its typings declare only a `data` event, though it is a Transform.
    if (node.flowed) steps.push(new FlowedDecoder({ delSp: node.delSp }) as unknown as Transform);
    const charset = created.charset || 'utf-8';
    if (!isUtf8Charset(charset)) {
      try {
        steps.push((this as unknown as ParserInternals).decoder.decodeStream(charset));
      } catch {}
    }
    const part = new CountedPart(steps, new CharacterCount((n) => this.add(field, n)));
    this.counted.push(part.counted);
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
