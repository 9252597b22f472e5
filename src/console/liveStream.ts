import type { ServerResponse } from 'node:http';
import { canSeeProject } from '../operator/access.js';
import type { Principal } from '../operator/sessions.js';
import { countStreamOverflow } from '../platform/metrics.js';

const OVERFLOW = `event: refresh\ndata: ${JSON.stringify({ reason: 'overflow' })}\n\n`;
/** Chunked-encoding framing (hex length and two CRLFs), counted with its bytes. */
const FRAMING_BYTES = 16;

const authorityOf = (p: Principal): string =>
  p.via === 'session' ? `session:${p.sessionHash?.toString('hex')}` : `token:${p.tokenId}`;

/** One open live-update stream (server-sent events): bound to the session or token that opened it, its queue bounded. */
export class LiveStream {
  /** Streams of one are checked once. */
  readonly authority: string;
  /** Its `refresh` is queued, and nothing more is written until its client has taken everything. */
  private behind = false;
  /** At the second, it is closed. */
  private behindChecks = 0;

  constructor(
    readonly res: ServerResponse,
    public principal: Principal,
    readonly project: string | null,
    readonly environment: string | null,
    /** A check started earlier and answering later is ignored. */
    public checkedBy: number,
  ) {
    this.authority = authorityOf(principal);
  }

  sees(project: string, environment: string): boolean {
    return (
      canSeeProject(this.principal, project) &&
      (this.project === null || this.project === project) &&
      (this.environment === null || this.environment === environment)
    );
  }

  /** Past `maxQueuedBytes`: one `refresh` (room is kept for it), then nothing until the client has taken everything. True when it wrote. */
  deliver(payload: string, maxQueuedBytes: number): boolean {
    const res = this.res;
    if (res.destroyed) return false;
    if (this.behind) {
      if (res.writableLength > 0) return false;
      this.behind = false;
      this.behindChecks = 0;
    }
    const room = maxQueuedBytes - res.writableLength - OVERFLOW.length - 2 * FRAMING_BYTES;
    if (Buffer.byteLength(payload) > room) {
      this.behind = true;
      countStreamOverflow();
      res.write(OVERFLOW);
      return true;
    }
    res.write(payload);
    return true;
  }

  /** Counts a check that finds it still behind; true at the second. */
  stalled(): boolean {
    if (!this.behind || this.res.writableLength === 0) return false;
    return ++this.behindChecks >= 2;
  }

  end(): void {
    if (this.res.writableLength > 0) this.res.destroy();
    else this.res.end();
  }
}
