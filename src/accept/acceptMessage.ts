import type { Clock } from '../clock.js';
import { ContractError } from '../contract/errors.js';
import type { SendAccepted, Status } from '../contract/types.gen.js';
import { newMessageId } from '../ids.js';
import type { Logger } from '../log.js';
import type { AuthContext } from '../policy/apiKeys.js';
import type { Db } from '../store/db.js';
import type { AcceptanceOutcome } from '../store/acceptance.js';
import { findIdempotentResponse } from '../store/idempotency.js';
import type { IndexWriter } from '../store/indexWriter.js';
import type { HoldReason } from '../store/messages.js';
import type { Spool } from '../spool/spool.js';
import type { SpoolWriters } from '../spool/writers.js';
import type { OutgoingMessage } from './outgoingMessage.js';

export interface AcceptDeps {
  db: Db;
  spool: Spool;
  writers: SpoolWriters;
  indexWriter: IndexWriter;
  clock: Clock;
  logger: Logger;
}

export interface AcceptOptions {
  source: 'http' | 'smtp';
  idempotencyKey: string | null;
}

interface InitialState {
  status: Status;
  paused: boolean;
  holdReason: HoldReason;
}

/**
 * Precedence, most binding first: a sandbox message is `captured` (never auto-forwarded); a
 * held one is `paused` (the request's flag or the project's pause); a future `scheduled_at`
 * is `scheduled`; otherwise `queued`. `paused` reports the held state whatever the status.
 */
export function initialState(auth: AuthContext, message: OutgoingMessage): InitialState {
  const holdReason: HoldReason = message.paused ? 'request' : auth.project.paused ? 'project' : null;
  const paused = holdReason !== null;
  if (auth.environment === 'sandbox') return { status: 'captured', paused, holdReason };
  if (paused) return { status: 'paused', paused, holdReason };
  return { status: message.scheduledAt ? 'scheduled' : 'queued', paused, holdReason };
}

/**
 * The accept pipeline's last step, shared by both doors: compose, write the MIME file durably,
 * then commit the index row, Idempotency-Key, and `mail.accepted` event in one transaction.
 * It resolves only after both are durable, so the caller may acknowledge.
 */
export class AcceptPipeline {
  private readonly inFlight = new Map<string, Promise<SendAccepted>>();

  constructor(private readonly deps: AcceptDeps) {}

  /**
   * Runs `attempt` at most once per (project, environment, Idempotency-Key) at a time: a repeat gets the
   * stored 202 body (the first body wins, even if the repeat's body differs or is invalid);
   * a concurrent repeat waits for the first and shares its outcome when it succeeds.
   */
  async idempotent(auth: AuthContext, key: string | null, attempt: () => Promise<SendAccepted>): Promise<SendAccepted> {
    if (key === null) return attempt();
    const slot = `${auth.project.id}\u0000${auth.environment}\u0000${key}`;
    for (;;) {
      const stored = findIdempotentResponse(this.deps.db, auth.project.id, auth.environment, key);
      if (stored) return JSON.parse(stored) as SendAccepted;
      const running = this.inFlight.get(slot);
      if (!running) break;
      try {
        return await running;
      } catch {
        // The first attempt failed and stored nothing: this one proceeds on its own body.
      }
    }
    const promise = attempt();
    this.inFlight.set(slot, promise);
    try {
      return await promise;
    } finally {
      if (this.inFlight.get(slot) === promise) this.inFlight.delete(slot);
    }
  }

  async accept(auth: AuthContext, message: OutgoingMessage, opts: AcceptOptions): Promise<SendAccepted> {
    const { spool, writers, indexWriter, clock, logger } = this.deps;
    const now = clock.now();
    const id = newMessageId(now);
    const state = initialState(auth, message);
    const response: SendAccepted = {
      id,
      status: state.status,
      scheduled_at: message.scheduledAt?.raw ?? null,
      paused: state.paused,
      category: message.category,
      project_id: auth.project.id,
      routing: { provider: message.routing.provider, strategy: message.routing.strategy },
    };
    let relPath: string;
    let dir: string;
    let size: number;
    try {
      ({ relPath, dir, size } = await writers.write(id, message, now));
    } catch (err) {
      logger.error({ err, message_id: id }, 'spool write failed');
      throw new ContractError('server_error');
    }

    const recipients = { to: message.to.map((m) => m.email), cc: message.cc.map((m) => m.email), bcc: message.bcc.map((m) => m.email) };
    let outcome: AcceptanceOutcome;
    try {
      outcome = await indexWriter.submit([dir], {
        message: {
          id,
          project_id: auth.project.id,
          environment: auth.environment,
          source: opts.source,
          status: state.status,
          hold_reason: state.holdReason,
          from_email: message.from.email,
          recipients: JSON.stringify(recipients),
          subject: message.subject,
          tags: JSON.stringify(message.tags),
          metadata: JSON.stringify(message.metadata),
          category: message.category,
          routing: JSON.stringify(message.routing),
          provider_options: message.providerOptions ? JSON.stringify(message.providerOptions) : null,
          scheduled_at: message.scheduledAt?.at ?? null,
          spool_path: relPath,
          size_bytes: size,
          idempotency_key: opts.idempotencyKey,
          created_at: now,
          updated_at: now,
          next_attempt_at: state.status === 'queued' ? now : state.status === 'scheduled' ? message.scheduledAt!.at : null,
        },
        idempotency: opts.idempotencyKey === null ? null : { key: opts.idempotencyKey, response: JSON.stringify(response) },
        event: {
          project_id: auth.project.id,
          message_id: id,
          type: 'mail.accepted',
          created_at: now,
          data: JSON.stringify({
            mail: {
              uid: id,
              subject: message.subject,
              from: message.from.email,
              to: recipients.to,
              project: { uid: auth.project.id, name: auth.project.name },
              tags: message.tags,
              metadata: message.metadata,
            },
            status: state.status,
            environment: auth.environment,
          }),
        },
      });
    } catch (err) {
      await spool.remove(relPath).catch(() => undefined);
      logger.error({ err, message_id: id }, 'index commit failed');
      throw new ContractError('server_error');
    }
    if (outcome.kind === 'duplicate') {
      await spool.remove(relPath).catch(() => undefined);
      return JSON.parse(outcome.response) as SendAccepted;
    }
    logger.debug({ message_id: id, project_id: auth.project.id, status: state.status, source: opts.source, size }, 'message accepted');
    return response;
  }
}
