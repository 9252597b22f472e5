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

type State = 'text' | 'equals' | 'equalsBlanks' | 'equalsHex' | 'equalsCr' | 'cr';

/**
 * A quoted-printable decoder (RFC 2045, 6.7) that streams: libqp's gathers a whole part (quadratic in a run of blanks).
 * Decodes as libqp does, except that `=4=` + line break + `1` stays as written (that is no quoted-printable).
 */
export class QuotedPrintableDecoder extends Transform {
  private state: State = 'text';
  private firstDigit = 0;
  private blanks: number[] = [];
  /** Blanks after an `=`, until it is known whether a line break follows (a soft break). */
  private blanksAfterEquals: number[] = [];
  private out: Buffer = Buffer.alloc(0);
  private length = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.out = Buffer.allocUnsafe(
      chunk.length + this.blanks.length + this.blanksAfterEquals.length + 3,
    );
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
          this.state = 'text';
          this.blanksAfterEquals = [];
          this.putBlanks();
        } else if (isBlank(byte)) {
          this.blanksAfterEquals.push(byte);
        } else {
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
        // Blanks before a CR are dropped (libqp reads a CR as a line's end).
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
