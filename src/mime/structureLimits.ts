import { Transform } from 'node:stream';
import type { ErrorDetail } from '../contract/errors.js';
import { headerBlockEnd } from './headerBlock.js';

/** Every stored message is parsed again by mailsplit (console, JSON providers): no message is taken that it would refuse. */

export const MAX_HEADER_BLOCK_BYTES = 1024 * 1024;

export const MAX_MIME_NODES = 1000;

/** Room is kept for the Message-ID the rewrite may add. */
export const RECEIVED_PARSER_LIMITS = {
  maxHeadSize: MAX_HEADER_BLOCK_BYTES - 1024,
  maxChildNodes: MAX_MIME_NODES,
} as const;

export type StructureProblem = 'header_block' | 'mime_parts';

const REFUSALS: Record<StructureProblem, { detail: ErrorDetail; message: string }> = {
  header_block: {
    detail: { field: 'headers', code: 'headers:too_large' },
    message: `A header block (the message's own or a MIME part's) is larger than the ${MAX_HEADER_BLOCK_BYTES} bytes Postern takes, the headers it adds included.`,
  },
  mime_parts: {
    detail: { field: 'body', code: 'body:too_many_parts' },
    message: `The message has more than ${MAX_MIME_NODES} MIME parts (the message itself counted).`,
  },
};

/** The sender's fault, and permanent (422 / 554 5.6.0), never a server fault. */
export class MessageStructureRefused extends Error {
  readonly detail: ErrorDetail;

  constructor(readonly problem: StructureProblem) {
    super(REFUSALS[problem].message);
    this.detail = REFUSALS[problem].detail;
  }
}

/** mailsplit 5.4's message-splitter.js, maxLenError (EMAXLEN). */
export const MAILSPLIT_LIMIT_MESSAGES: Readonly<Record<StructureProblem, string>> = {
  header_block: 'Max header size for a MIME node exceeded',
  mime_parts: 'Max allowed child nodes exceeded',
};

export function structureRefusal(err: unknown): MessageStructureRefused | null {
  if (err instanceof MessageStructureRefused) return err;
  if (!(err instanceof Error) || (err as Error & { code?: unknown }).code !== 'EMAXLEN')
    return null;
  for (const [problem, message] of Object.entries(MAILSPLIT_LIMIT_MESSAGES) as [
    StructureProblem,
    string,
  ][]) {
    if (err.message === message) return new MessageStructureRefused(problem);
  }
  return null;
}

/** A composed message's parts have small header blocks; its top-level one holds the client's custom headers. */
export function headerBlockLimit(): Transform {
  let read = 0;
  let found = false;
  let before1 = -1;
  let before2 = -1;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (!found) {
        const at = (i: number) => (i >= 0 ? chunk[i] : i === -1 ? before1 : before2);
        // A LF ends the block when the line it ends is empty (after a LF, or a CR after a LF), or is the first line.
        for (let i = chunk.indexOf(0x0a); i !== -1 && !found; i = chunk.indexOf(0x0a, i + 1)) {
          const position = read + i;
          const prev = at(i - 1);
          found =
            position === 0 ||
            prev === 0x0a ||
            (prev === 0x0d && (position === 1 || at(i - 2) === 0x0a));
          if (found && position + 1 > MAX_HEADER_BLOCK_BYTES) {
            done(new MessageStructureRefused('header_block'));
            return;
          }
        }
        if (!found && read + chunk.length > MAX_HEADER_BLOCK_BYTES) {
          done(new MessageStructureRefused('header_block'));
          return;
        }
        if (chunk.length > 0) {
          before2 = chunk.length >= 2 ? chunk[chunk.length - 2] : before1;
          before1 = chunk[chunk.length - 1];
        }
        read += chunk.length;
      }
      done(null, chunk);
    },
  });
}

export function checkHeaderBlock(message: Buffer): void {
  const end = headerBlockEnd(message);
  if ((end === -1 ? message.length : end) > MAX_HEADER_BLOCK_BYTES)
    throw new MessageStructureRefused('header_block');
}
