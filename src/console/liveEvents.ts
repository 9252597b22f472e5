import type { ServerResponse } from 'node:http';
import type { Logger } from '../log.js';
import type { ActivityTail } from '../operator/activity.js';

/** What a `message` event says of a message. */
export interface MessageChange {
  id: string;
  status: string;
  project_id: string;
  environment: 'production' | 'sandbox';
  /** The lifecycle event that announced it (`mail.accepted`, …), or the operator's action (`message.release`, …). */
  type: string;
}

interface Client {
  res: ServerResponse;
  /** Projects it may see (null: all). */
  projects: string[] | null;
  project: string | null;
  environment: string | null;
}

const HEARTBEAT_MS = 15_000;

/**
 * The console's live updates (server-sent events). New and changed messages come from the
 * events outbox, read by sequence every `pollMs` while at least one stream is open (one reader
 * for all streams, not a hook in either door); the console's own message actions are announced
 * as they happen. Each stream gets only the messages of projects its operator may see, and of
 * the project / environment it asked for.
 */
export class LiveEvents {
  private readonly clients = new Set<Client>();
  private poll: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private primed = false;

  constructor(
    private readonly activity: ActivityTail,
    private readonly pollMs: number,
    private readonly logger: Logger,
  ) {
    activity.subscribe((events) => {
      // The first catch-up reads the last 24 hours for the overview: history, not news.
      if (!this.primed || this.clients.size === 0) return;
      const types = new Map(events.filter((e) => e.message_id !== null).map((e) => [e.message_id!, e.type]));
      if (types.size === 0) return;
      this.activity.messagesNow([...types.keys()]).then(
        (now) => this.announce(now.map((m) => ({ ...m, type: types.get(m.id)! }))),
        (err: unknown) => this.logger.warn({ err }, 'live updates: reading the changed messages failed'),
      );
    });
  }

  /** Opens a stream on `res` (answered 200, kept open until the client leaves or the server stops). */
  async open(res: ServerResponse, projects: string[] | null, filter: { project: string | null; environment: string | null }): Promise<void> {
    if (!this.primed) {
      await this.activity.catchUp();
      this.primed = true;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
    res.write(`retry: 3000\n: connected\n\n`);
    const client: Client = { res, projects, ...filter };
    this.clients.add(client);
    res.on('close', () => {
      this.clients.delete(client);
      if (this.clients.size === 0) this.stopTimers();
    });
    this.startTimers();
  }

  /** Messages changed by an operator's action in this process. */
  announce(changes: MessageChange[]): void {
    for (const change of changes) {
      const payload = `event: message\ndata: ${JSON.stringify({ id: change.id, status: change.status, project_id: change.project_id, environment: change.environment, type: change.type })}\n\n`;
      for (const c of this.clients) {
        if (c.projects !== null && !c.projects.includes(change.project_id)) continue;
        if (c.project !== null && c.project !== change.project_id) continue;
        if (c.environment !== null && c.environment !== change.environment) continue;
        c.res.write(payload);
      }
    }
  }

  /** Many messages changed at once (a bulk action): every stream is told to reload its list. */
  refresh(detail: Record<string, unknown>): void {
    const payload = `event: refresh\ndata: ${JSON.stringify(detail)}\n\n`;
    for (const c of this.clients) c.res.write(payload);
  }

  /** Ends every stream (shutdown: the server can then close at once). */
  close(): void {
    this.stopTimers();
    for (const c of this.clients) c.res.end();
    this.clients.clear();
  }

  private startTimers(): void {
    if (this.poll) return;
    this.poll = setInterval(() => {
      this.activity.catchUp().catch((err: unknown) => this.logger.warn({ err }, 'live updates: reading the events outbox failed'));
    }, this.pollMs);
    this.heartbeat = setInterval(() => {
      for (const c of this.clients) c.res.write(': ping\n\n');
    }, HEARTBEAT_MS);
    this.poll.unref();
    this.heartbeat.unref();
  }

  private stopTimers(): void {
    if (this.poll) clearInterval(this.poll);
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.poll = null;
    this.heartbeat = null;
  }
}
