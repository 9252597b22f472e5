import { Transform, type TransformCallback } from 'node:stream';

/** Blanks held back (dropped if a line break follows them) before they are let through anyway. */
const MAX_HELD_BLANKS = 64 * 1024;

const LF = 0x0a;
const CR = 0x0d;
const EQUALS = 0x3d;
const isBlank = (byte: number) => byte === 0x20 || byte === 0x09;

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x37;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  return -1;
}

/**
 * What the decoder waits on: nothing; the byte after `=`; a line break after `=` and blanks
 * (a soft break whose blanks transport added); the second hex digit; the LF after `=` CR; the LF
 * after a CR.
 */
type State = 'text' | 'equals' | 'equalsBlanks' | 'equalsHex' | 'equalsCr' | 'cr';

/**
 * A quoted-printable decoder (RFC 2045, section 6.7) that streams, in one pass. libqp's Decoder,
 * which mailsplit and so mailparser use, gathers a part's whole body before decoding it (and
 * takes time quadratic in a run of blanks), so one large QP part held the server's memory for as
 * long as it arrived. This holds only what a decision waits on: the bytes after an `=` until it
 * is known what it is, a CR, and the blanks that may turn out to be trailing (let through past
 * MAX_HELD_BLANKS). It decodes as libqp's decode does: blanks before a line break (or a CR, or
 * the end) dropped, `=` before a line break or at the end (blanks between allowed) a soft break,
 * `=XX` its byte in either case, any other `=` kept as written. (libqp removes soft breaks before
 * it reads escapes, so it also joins `=4=` and `1` on the next line into one byte; that is no
 * quoted-printable, and here they stay as written.)
 */
export class QuotedPrintableDecoder extends Transform {
  private state: State = 'text';
  /** The first hex digit after `=`, as written. */
  private firstDigit = 0;
  private blanks: number[] = [];
  /** Blanks after an `=`, until it is known whether a line break follows (a soft break). */
  private blanksAfterEquals: number[] = [];
  private out: Buffer = Buffer.alloc(0);
  private length = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    // Every input byte gives at most one output byte, plus what was held: the blanks, `=X`, a CR.
    this.out = Buffer.allocUnsafe(chunk.length + this.blanks.length + this.blanksAfterEquals.length + 3);
    this.length = 0;
    for (let i = 0; i < chunk.length; i++) this.decodeByte(chunk[i]);
    if (this.blanks.length + this.blanksAfterEquals.length > MAX_HELD_BLANKS) this.putHeld();
    if (this.length > 0) this.push(this.out.subarray(0, this.length));
    done();
  }

  override _flush(done: TransformCallback): void {
    this.out = Buffer.allocUnsafe(this.blanks.length + 3);
    this.length = 0;
    // At the end: `=` (and blanks) is a soft break, trailing blanks and those before a CR go.
    if (this.state === 'equalsHex') {
      this.putBlanks();
      this.put(EQUALS);
      this.put(this.firstDigit);
    } else if (this.state === 'equalsCr') {
      this.putBlanks();
      this.put(EQUALS);
      this.put(CR);
    } else if (this.state === 'cr') {
      this.put(CR);
    }
    this.blanks = [];
    this.blanksAfterEquals = [];
    if (this.length > 0) this.push(this.out.subarray(0, this.length));
    done();
  }

  private put(byte: number): void {
    this.out[this.length++] = byte;
  }

  private putBlanks(): void {
    for (const b of this.blanks) this.put(b);
    this.blanks = [];
  }

  /** A pathological run of blanks: let through as it stands rather than held without bound. */
  private putHeld(): void {
    this.putBlanks();
    if (this.state === 'equalsBlanks' || this.state === 'equalsCr') {
      this.put(EQUALS);
      if (this.state === 'equalsCr') this.put(CR);
      for (const b of this.blanksAfterEquals) this.put(b);
      this.blanksAfterEquals = [];
      this.state = 'text';
    }
  }

  /** `=` was no escape and no soft break: it is kept, and what followed it read as text. */
  private literalEquals(byte: number): void {
    this.putBlanks();
    this.put(EQUALS);
    this.state = 'text';
    this.blanks = this.blanksAfterEquals;
    this.blanksAfterEquals = [];
    this.decodeByte(byte);
  }

  private decodeByte(byte: number): void {
    switch (this.state) {
      case 'equals':
      case 'equalsBlanks':
        if (byte === LF) {
          // A soft break: the blanks before the `=` were no trailing ones.
          this.state = 'text';
          this.blanksAfterEquals = [];
          this.putBlanks();
        } else if (byte === CR) {
          // Blanks before a CR go (below, those after it are held until the LF, if one comes).
          this.blanksAfterEquals = [];
          this.state = 'equalsCr';
        } else if (isBlank(byte)) {
          this.blanksAfterEquals.push(byte);
          this.state = 'equalsBlanks';
        } else if (this.state === 'equals' && hexValue(byte) >= 0) {
          this.firstDigit = byte;
          this.state = 'equalsHex';
        } else {
          this.literalEquals(byte);
        }
        return;
      case 'equalsHex': {
        const low = hexValue(byte);
        this.putBlanks();
        this.state = 'text';
        if (low >= 0) {
          this.put(hexValue(this.firstDigit) * 16 + low);
        } else {
          this.put(EQUALS);
          this.put(this.firstDigit);
          this.decodeByte(byte);
        }
        return;
      }
      case 'equalsCr':
        if (byte === LF) {
          this.state = 'text'; // a soft break
          this.blanksAfterEquals = [];
          this.putBlanks();
        } else if (isBlank(byte)) {
          this.blanksAfterEquals.push(byte);
        } else {
          // No soft break: `=`, then a CR, then the blanks after it as text.
          this.putBlanks();
          this.put(EQUALS);
          this.put(CR);
          this.state = 'text';
          this.blanks = this.blanksAfterEquals;
          this.blanksAfterEquals = [];
          this.decodeByte(byte);
        }
        return;
      case 'cr':
        // Blanks before a CR are dropped (libqp reads a CR as a line's end), before CRLF too.
        this.state = 'text';
        this.blanks = [];
        this.put(CR);
        if (byte === LF) this.put(LF);
        else this.decodeByte(byte);
        return;
      case 'text':
        if (byte === EQUALS) this.state = 'equals';
        else if (byte === CR) this.state = 'cr';
        else if (byte === LF) {
          this.blanks = [];
          this.put(LF);
        } else if (isBlank(byte)) this.blanks.push(byte);
        else {
          this.putBlanks();
          this.put(byte);
        }
    }
  }
}
