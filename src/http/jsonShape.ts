/**
 * A JSON text's depth, keys, items and values, checked as it arrives and before JSON.parse, which runs to
 * the end whatever it meets, blocking the event loop (docs/http-api.md). Structure only: JSON.parse refuses non-JSON.
 */

import { TimeSlices } from '../platform/timeSlices.js';

export interface ShapeLimits {
  maxDepth: number;
  maxKeys: number;
  maxItems: number;
  /** Keys and values of the whole text. */
  maxValues: number;
}

export type ShapeProblem =
  | { kind: 'depth' | 'keys' | 'items'; path: string[] }
  | { kind: 'values' };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

const isWhitespace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

interface Frame {
  object: boolean;
  count: number;
  /** The current key, quotes included. */
  keyStart: number;
  keyEnd: number;
}

/** Fed in pieces into one buffer (`feed(buf, end)`: bytes up to `end` are there, earlier ones unchanged). */
export class JsonShapeScanner {
  private readonly stack: Frame[] = [];
  private expectKey = false;
  private inLiteral = false;
  private values = 0;
  private at = 0;
  /** Inside a string: where its opening quote is (-1 outside one). */
  private stringStart = -1;
  /** Once found, every later feed returns it. */
  private problem: ShapeProblem | null = null;

  constructor(private readonly limits: ShapeLimits) {}

  feed(buf: Buffer, end: number): ShapeProblem | null {
    while (this.problem === null && this.at < end) this.problem = this.step(buf, end);
    return this.problem;
  }

  private step(buf: Buffer, end: number): ShapeProblem | null {
    if (this.stringStart !== -1) return this.finishString(buf, end);
    const c = buf[this.at];
    if (c === QUOTE) {
      this.stringStart = this.at;
      this.at++;
      return this.finishString(buf, end);
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      const problem = this.countValue(buf);
      if (problem) return problem;
      if (this.stack.length >= this.limits.maxDepth)
        return { kind: 'depth', path: this.pathOf(buf, this.stack) };
      this.stack.push({ object: c === OPEN_OBJECT, count: 0, keyStart: -1, keyEnd: -1 });
      this.expectKey = c === OPEN_OBJECT;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      this.stack.pop();
      this.expectKey = false;
    } else if (c === COMMA) {
      this.expectKey = this.stack.length > 0 && this.stack[this.stack.length - 1].object;
    } else if (c === COLON) {
      this.expectKey = false;
    } else if (!isWhitespace(c)) {
      // A number, true, false or null (or bytes JSON.parse will refuse), a byte at a time.
      const problem = this.inLiteral ? null : this.countValue(buf);
      this.inLiteral = true;
      this.at++;
      return problem;
    }
    this.inLiteral = false;
    this.at++;
    return null;
  }

  private finishString(buf: Buffer, end: number): ShapeProblem | null {
    const from = this.stringStart + 1;
    // Bounded by `end`: past it the buffer holds bytes not received yet.
    const window = buf.subarray(0, end);
    for (
      let quote = window.indexOf(QUOTE, this.at);
      quote !== -1;
      quote = window.indexOf(QUOTE, quote + 1)
    ) {
      let backslashes = 0;
      for (let b = quote - 1; b >= from && buf[b] === BACKSLASH; b--) backslashes++;
      if (backslashes % 2 === 1) continue;
      const start = this.stringStart;
      this.stringStart = -1;
      this.inLiteral = false;
      this.at = quote + 1;
      const top = this.stack[this.stack.length - 1];
      if (!(top?.object && this.expectKey)) return this.countValue(buf);
      if (++this.values > this.limits.maxValues) return { kind: 'values' };
      if (++top.count > this.limits.maxKeys)
        return { kind: 'keys', path: this.pathOf(buf, this.stack.slice(0, -1)) };
      top.keyStart = start;
      top.keyEnd = quote + 1;
      this.expectKey = false;
      return null;
    }
    // Not closed yet: look again from here next feed (an escaped quote across the boundary is judged then).
    this.at = end;
    return null;
  }

  private countValue(buf: Buffer): ShapeProblem | null {
    if (++this.values > this.limits.maxValues) return { kind: 'values' };
    const top = this.stack[this.stack.length - 1];
    if (top && !top.object && ++top.count > this.limits.maxItems)
      return { kind: 'items', path: this.pathOf(buf, this.stack.slice(0, -1)) };
    return null;
  }

  private pathOf(buf: Buffer, frames: Frame[]): string[] {
    return frames.map((f) => {
      if (!f.object) return String(f.count - 1);
      const raw = buf.toString('utf8', f.keyStart, f.keyEnd);
      try {
        return JSON.parse(raw) as string;
      } catch {
        return raw.slice(1, -1);
      }
    });
  }
}

const STEP_BYTES = 64 * 1024;

/** The event loop gets a turn every `sliceMs`. */
export async function scanToEnd(
  scanner: JsonShapeScanner,
  buf: Buffer,
  sliceMs = 2,
): Promise<ShapeProblem | null> {
  const slices = new TimeSlices(sliceMs);
  for (let end = Math.min(buf.length, STEP_BYTES); ; end = Math.min(buf.length, end + STEP_BYTES)) {
    const problem = scanner.feed(buf, end);
    if (problem || end === buf.length) return problem;
    if (slices.spent) await slices.next();
  }
}
