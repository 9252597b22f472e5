import type { ServerResponse } from 'node:http';
import { ContractError } from '../contract/errors.js';
import type { Logger } from '../log.js';
import { canSeeProject } from '../operator/access.js';
import type { ActivityTail } from '../operator/activity.js';
import type { MessagesChanged } from '../operator/bulk.js';
import type { Principal } from '../operator/sessions.js';
import { countStreamClosed } from '../platform/metrics.js';
import { LiveStream } from './liveStream.js';

export interface MessageChange {
  id: string;
  status: string;
  project_id: string;
  environment: 'production' | 'sandbox';
  /** The lifecycle event (`mail.accepted`, …), or the operator's action (`message.release`, …). */
  type: string;
}

/** null once its session, token or operator has ended. */
export type AuthorityCheck = (principal: Principal) => Promise<Principal | null>;

export interface LiveLimits {
  pollMs: number;
  checkMs: number;
  maxQueuedBytes: number;
  maxStreams: number;
  maxStreamsPerOperator: number;
}

/** `postern_console_streams_closed_total`. */
type CloseReason = 'authority' | 'access' | 'stalled';

const HEARTBEAT_MS = 15_000;
const HEARTBEAT = ': ping\n\n';

/**
 * The console's live updates (server-sent events), read from the events outbox while a stream is open (docs/console.md).
 * Each stream is bound to the session or token that opened it, re-checked every `checkMs`; its queue is bounded.
 */
export class LiveEvents {
  private readonly streams = new Set<LiveStream>();
  private poll: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private check: NodeJS.Timeout | null = null;
  private checking = false;
  private checks = 0;
  private primed = false;
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
      const types = new Map(
        events.filter((e) => e.message_id !== null).map((e) => [e.message_id!, e.type]),
      );
      if (types.size === 0) return;
      this.activity.messagesNow([...types.keys()]).then(
        (now) => this.announce(now.map((m) => ({ ...m, type: types.get(m.id)! }))),
        (err: unknown) =>
          this.logger.warn({ err }, 'live updates: reading the changed messages failed'),
      );
    });
  }

  /** Over a cap it throws: 429 for the operator's, 503 for the node's. */
  async open(
    res: ServerResponse,
    principal: Principal,
    filter: { project: string | null; environment: string | null },
  ): Promise<void> {
    if (!this.primed) {
      await this.activity.catchUp();
      this.primed = true;
    }
    // Gone while the outbox was read: nothing to open.
    if (res.destroyed || res.socket === null || res.socket.destroyed) return;
    // Counted after the wait, so streams opened at once cannot all pass.
    if (this.streams.size >= this.limits.maxStreams) {
      throw new ContractError('server_busy', {
        message: `This node has ${this.limits.maxStreams} live-update streams open (console.max_streams); retry later.`,
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(this.limits.checkMs / 1000))) },
      });
    }
    const operatorId = principal.operator.id;
    if (
      [...this.streams].filter((s) => s.principal.operator.id === operatorId).length >=
      this.limits.maxStreamsPerOperator
    ) {
      throw new ContractError('rate_limited', {
        message: `You have ${this.limits.maxStreamsPerOperator} live-update streams open on this node (console.max_streams_per_operator); close one first.`,
        headers: { 'Retry-After': '1' },
      });
    }
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    res.write(`retry: 3000\n: connected\n\n`);
    const stream = new LiveStream(res, principal, filter.project, filter.environment, this.checks);
    this.streams.add(stream);
    res.on('close', () => {
      this.streams.delete(stream);
      if (this.streams.size === 0) this.stopTimers();
    });
    this.startTimers();
  }

  announce(changes: MessageChange[]): void {
    for (const change of changes) {
      const payload = `event: message\ndata: ${JSON.stringify({ id: change.id, status: change.status, project_id: change.project_id, environment: change.environment, type: change.type })}\n\n`;
      for (const s of this.streams) {
        if (s.sees(change.project_id, change.environment)) this.deliver(s, payload);
      }
    }
  }

  /** A bulk action: each stream that may see any of them reloads its list; the others hear nothing. */
  refresh(detail: { reason: string; action: string }, changed: readonly MessagesChanged[]): void {
    for (const s of this.streams) {
      const count = changed.reduce(
        (n, c) => n + (s.sees(c.project_id, c.environment) ? c.count : 0),
        0,
      );
      if (count > 0)
        this.deliver(s, `event: refresh\ndata: ${JSON.stringify({ ...detail, count })}\n\n`);
    }
  }

  end(which: { sessionHash: Buffer } | { tokenId: string } | { operatorId: string }): void {
    for (const s of [...this.streams]) {
      const p = s.principal;
      const match =
        'sessionHash' in which
          ? p.sessionHash?.equals(which.sessionHash)
          : 'tokenId' in which
            ? p.tokenId === which.tokenId
            : p.operator.id === which.operatorId;
      if (match) this.closeStream(s, 'authority');
    }
  }

  /** Streams whose authority ended are closed, the others see what their operator may see now. */
  async recheck(operatorId?: string): Promise<void> {
    const run = ++this.checks;
    const groups = new Map<string, LiveStream[]>();
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
          else if (s.project !== null && !canSeeProject(now, s.project))
            this.closeStream(s, 'access');
          else s.principal = now;
        }
      }),
    );
  }

  figures(): { open: number; queuedPeakBytes: number } {
    return { open: this.streams.size, queuedPeakBytes: this.queuedPeak };
  }

  close(): void {
    this.stopTimers();
    // A stream whose client is not reading would hold the shutdown for its grace: cut it off.
    for (const s of this.streams) s.end();
    this.streams.clear();
  }

  private closeStream(s: LiveStream, reason: CloseReason): void {
    if (!this.streams.delete(s)) return;
    countStreamClosed(reason);
    s.end();
    if (this.streams.size === 0) this.stopTimers();
  }

  private deliver(s: LiveStream, payload: string): void {
    if (s.deliver(payload, this.limits.maxQueuedBytes) && s.res.writableLength > this.queuedPeak)
      this.queuedPeak = s.res.writableLength;
  }

  private checkStreams(): void {
    for (const s of [...this.streams]) {
      if (s.stalled()) this.closeStream(s, 'stalled');
    }
    if (this.checking || this.streams.size === 0) return;
    this.checking = true;
    this.recheck()
      .catch((err: unknown) =>
        this.logger.warn({ err }, 'live updates: checking the streams failed'),
      )
      .finally(() => (this.checking = false));
  }

  private startTimers(): void {
    if (this.poll) return;
    this.poll = setInterval(() => {
      this.activity
        .catchUp()
        .catch((err: unknown) =>
          this.logger.warn({ err }, 'live updates: reading the events outbox failed'),
        );
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
