import type { ServerResponse } from 'node:http';
import { ContractError } from '../contract/errors.js';
import type { Logger } from '../log.js';
import { canSeeProject } from '../operator/access.js';
import type { ActivityTail } from '../operator/activity.js';
import type { MessagesChanged } from '../operator/bulk.js';
import type { Principal } from '../operator/sessions.js';
import { countStreamClosed, countStreamOverflow } from '../platform/metrics.js';

/** What a `message` event says of a message. */
export interface MessageChange {
  id: string;
  status: string;
  project_id: string;
  environment: 'production' | 'sandbox';
  /** The lifecycle event that announced it (`mail.accepted`, …), or the operator's action (`message.release`, …). */
  type: string;
}

/** The principal a stream was opened with, as it is now; null once its session, token or operator has ended. */
export type AuthorityCheck = (principal: Principal) => Promise<Principal | null>;

export interface LiveLimits {
  /** `console.events_poll_ms`: how often the events outbox is read while a stream is open. */
  pollMs: number;
  /** `console.stream_check_ms`: how often every stream's authority is read again. */
  checkMs: number;
  /** `console.stream_max_queued_bytes`: what a stream may have waiting for its client. */
  maxQueuedBytes: number;
  /** `console.max_streams`, `console.max_streams_per_operator`: streams open at once on this node. */
  maxStreams: number;
  maxStreamsPerOperator: number;
}

/** Why the server closed a stream (`postern_console_streams_closed_total`). */
type CloseReason = 'authority' | 'access' | 'stalled';

interface Stream {
  res: ServerResponse;
  principal: Principal;
  /** The session or token it was opened with (streams of one are checked once). */
  authority: string;
  project: string | null;
  environment: string | null;
  /** Fell behind: its `refresh` is queued, and nothing more is written until its client has taken everything. */
  behind: boolean;
  /** Checks passed while behind: at the second, it is closed. */
  behindChecks: number;
  /** The latest check applied to it (a check started earlier and answering later is ignored). */
  checkedBy: number;
}

const HEARTBEAT_MS = 15_000;
const HEARTBEAT = ': ping\n\n';
const OVERFLOW = `event: refresh\ndata: ${JSON.stringify({ reason: 'overflow' })}\n\n`;
/** A write's chunked-encoding framing (hex length and two CRLFs), counted with its bytes. */
const FRAMING_BYTES = 16;

const authorityOf = (p: Principal): string => (p.via === 'session' ? `session:${p.sessionHash?.toString('hex')}` : `token:${p.tokenId}`);

/**
 * The console's live updates (server-sent events), one for all the console listeners of a node.
 * New and changed messages come from the events outbox, read by sequence every `pollMs` while at
 * least one stream is open (one reader for all streams, not a hook in either door); the console's
 * own message actions are announced as they happen. Each stream gets only the messages of
 * projects its operator may see, and of the project / environment it asked for.
 *
 * A stream is bound to the session or token that opened it: every `checkMs` each one's authority
 * is read again (`AuthorityCheck`: on PostgreSQL that sees a sign-out on another node), and the
 * console's own sign-out, revocation and operator changes end or re-check the streams at once
 * (`end`, `recheck`). What a stream may queue for a client that does not read is bounded
 * (`maxQueuedBytes`): past it the stream gets one `refresh` and nothing more until its client
 * has caught up, and one still behind at the next check is closed. Streams are capped per node
 * and per operator.
 */
export class LiveEvents {
  private readonly streams = new Set<Stream>();
  private poll: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private check: NodeJS.Timeout | null = null;
  private checking = false;
  private checks = 0;
  private primed = false;
  /** The most bytes any stream has had waiting for its client (`postern_console_stream_queued_bytes_peak`). */
  private queuedPeak = 0;

  constructor(
    private readonly activity: ActivityTail,
    private readonly authority: AuthorityCheck,
    private readonly limits: LiveLimits,
    private readonly logger: Logger,
  ) {
    activity.subscribe((events) => {
      // The first catch-up reads the last 24 hours for the overview: history, not news.
      if (!this.primed || this.streams.size === 0) return;
      const types = new Map(events.filter((e) => e.message_id !== null).map((e) => [e.message_id!, e.type]));
      if (types.size === 0) return;
      this.activity.messagesNow([...types.keys()]).then(
        (now) => this.announce(now.map((m) => ({ ...m, type: types.get(m.id)! }))),
        (err: unknown) => this.logger.warn({ err }, 'live updates: reading the changed messages failed'),
      );
    });
  }

  /**
   * Opens a stream on `res` for `principal` (answered 200, kept open until the client leaves, its
   * authority ends or the server stops). Over a cap it throws: 429 for the operator's, 503 for
   * the node's.
   */
  async open(res: ServerResponse, principal: Principal, filter: { project: string | null; environment: string | null }): Promise<void> {
    if (!this.primed) {
      await this.activity.catchUp();
      this.primed = true;
    }
    // Gone while the outbox was read: nothing to open (its 'close' has passed).
    if (res.destroyed || res.socket === null || res.socket.destroyed) return;
    // Counted after the wait, so streams opened at once cannot all pass.
    if (this.streams.size >= this.limits.maxStreams) {
      throw new ContractError('server_busy', {
        message: `This node has ${this.limits.maxStreams} live-update streams open (console.max_streams); retry later.`,
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(this.limits.checkMs / 1000))) },
      });
    }
    const operatorId = principal.operator.id;
    if ([...this.streams].filter((s) => s.principal.operator.id === operatorId).length >= this.limits.maxStreamsPerOperator) {
      throw new ContractError('rate_limited', {
        message: `You have ${this.limits.maxStreamsPerOperator} live-update streams open on this node (console.max_streams_per_operator); close one first.`,
        headers: { 'Retry-After': '1' },
      });
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
    res.write(`retry: 3000\n: connected\n\n`);
    const stream: Stream = { res, principal, authority: authorityOf(principal), ...filter, behind: false, behindChecks: 0, checkedBy: this.checks };
    this.streams.add(stream);
    res.on('close', () => {
      this.streams.delete(stream);
      if (this.streams.size === 0) this.stopTimers();
    });
    this.startTimers();
  }

  /** Messages changed by an operator's action in this process. */
  announce(changes: MessageChange[]): void {
    for (const change of changes) {
      const payload = `event: message\ndata: ${JSON.stringify({ id: change.id, status: change.status, project_id: change.project_id, environment: change.environment, type: change.type })}\n\n`;
      for (const s of this.streams) {
        if (this.sees(s, change.project_id, change.environment)) this.deliver(s, payload);
      }
    }
  }

  /**
   * Many messages changed at once (a bulk action): each stream that may see any of them is told
   * to reload its list, with the count of those it may see; the others hear nothing of it.
   */
  refresh(detail: { reason: string; action: string }, changed: readonly MessagesChanged[]): void {
    for (const s of this.streams) {
      const count = changed.reduce((n, c) => n + (this.sees(s, c.project_id, c.environment) ? c.count : 0), 0);
      if (count > 0) this.deliver(s, `event: refresh\ndata: ${JSON.stringify({ ...detail, count })}\n\n`);
    }
  }

  /** Ends at once the streams of a session or token that has just ended, or of an operator just removed. */
  end(which: { sessionHash: Buffer } | { tokenId: string } | { operatorId: string }): void {
    for (const s of [...this.streams]) {
      const p = s.principal;
      const match =
        'sessionHash' in which ? p.sessionHash?.equals(which.sessionHash) : 'tokenId' in which ? p.tokenId === which.tokenId : p.operator.id === which.operatorId;
      if (match) this.closeStream(s, 'authority');
    }
  }

  /**
   * Reads the authority of every stream (of one operator: their sessions or role or projects
   * just changed) again, and applies it: streams whose authority ended are closed, the others
   * see what their operator may see now. Resolves once applied.
   */
  async recheck(operatorId?: string): Promise<void> {
    const run = ++this.checks;
    const groups = new Map<string, Stream[]>();
    for (const s of this.streams) {
      if (operatorId !== undefined && s.principal.operator.id !== operatorId) continue;
      groups.set(s.authority, [...(groups.get(s.authority) ?? []), s]);
    }
    await Promise.all(
      [...groups.values()].map(async (streams) => {
        let now: Principal | null;
        try {
          now = await this.authority(streams[0].principal);
        } catch (err) {
          // Unknown is not ended: the next check reads it again.
          this.logger.warn({ err }, 'live updates: reading a stream’s session or token failed');
          return;
        }
        for (const s of streams) {
          if (!this.streams.has(s) || s.checkedBy > run) continue;
          s.checkedBy = run;
          if (now === null) this.closeStream(s, 'authority');
          else if (s.project !== null && !canSeeProject(now, s.project)) this.closeStream(s, 'access');
          else s.principal = now;
        }
      }),
    );
  }

  /** Streams open now, and the most bytes any of them has had waiting for its client. */
  figures(): { open: number; queuedPeakBytes: number } {
    return { open: this.streams.size, queuedPeakBytes: this.queuedPeak };
  }

  /** Ends every stream (shutdown: the server can then close at once). */
  close(): void {
    this.stopTimers();
    // A stream whose client is not reading would hold the shutdown for its grace: cut it off.
    for (const s of this.streams) {
      if (s.res.writableLength > 0) s.res.destroy();
      else s.res.end();
    }
    this.streams.clear();
  }

  private closeStream(s: Stream, reason: CloseReason): void {
    if (!this.streams.delete(s)) return;
    countStreamClosed(reason);
    // What is still queued is cut off: a client that is not reading gets nothing more.
    if (s.res.writableLength > 0) s.res.destroy();
    else s.res.end();
    if (this.streams.size === 0) this.stopTimers();
  }

  private sees(s: Stream, project: string, environment: string): boolean {
    return canSeeProject(s.principal, project) && (s.project === null || s.project === project) && (s.environment === null || s.environment === environment);
  }

  /**
   * Writes `payload` unless the stream's queue would pass `maxQueuedBytes`: then, once, the
   * overflow `refresh` (room is kept for it), and nothing more until the client has taken
   * everything queued. Its reload after that refresh shows what was skipped meanwhile.
   */
  private deliver(s: Stream, payload: string): void {
    const res = s.res;
    if (res.destroyed) return;
    if (s.behind) {
      if (res.writableLength > 0) return;
      s.behind = false;
      s.behindChecks = 0;
    }
    const room = this.limits.maxQueuedBytes - res.writableLength - OVERFLOW.length - 2 * FRAMING_BYTES;
    if (Buffer.byteLength(payload) > room) {
      s.behind = true;
      countStreamOverflow();
      this.write(res, OVERFLOW);
      return;
    }
    this.write(res, payload);
  }

  private write(res: ServerResponse, text: string): void {
    res.write(text);
    if (res.writableLength > this.queuedPeak) this.queuedPeak = res.writableLength;
  }

  /** Every `checkMs`: a stream still behind since the last check is closed; every stream's authority is read again. */
  private checkStreams(): void {
    for (const s of [...this.streams]) {
      if (!s.behind || s.res.writableLength === 0) continue;
      if (++s.behindChecks >= 2) this.closeStream(s, 'stalled');
    }
    if (this.checking || this.streams.size === 0) return;
    this.checking = true;
    this.recheck()
      .catch((err: unknown) => this.logger.warn({ err }, 'live updates: checking the streams failed'))
      .finally(() => (this.checking = false));
  }

  private startTimers(): void {
    if (this.poll) return;
    this.poll = setInterval(() => {
      this.activity.catchUp().catch((err: unknown) => this.logger.warn({ err }, 'live updates: reading the events outbox failed'));
    }, this.limits.pollMs);
    this.heartbeat = setInterval(() => {
      for (const s of this.streams) this.deliver(s, HEARTBEAT);
    }, HEARTBEAT_MS);
    this.check = setInterval(() => this.checkStreams(), this.limits.checkMs);
    this.poll.unref();
    this.heartbeat.unref();
    this.check.unref();
  }

  private stopTimers(): void {
    if (this.poll) clearInterval(this.poll);
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.check) clearInterval(this.check);
    this.poll = null;
    this.heartbeat = null;
    this.check = null;
  }
}
