import type { Readable } from 'node:stream';
import type { Clock } from '../clock.js';
import type { AcceptanceOutcome, AcceptanceRecord } from '../commit/acceptance.js';
import type { AcceptanceCommits } from '../commit/nodeStore.js';
import { domainOf } from '../contract/address.js';
import { ContractError } from '../contract/errors.js';
import { initialStatus } from '../contract/messageStates.js';
import type { SendAccepted, Status } from '../contract/types.gen.js';
import { idempotencyKeyError } from '../contract/validators.js';
import { newMessageId } from '../ids.js';
import type { Logger } from '../log.js';
import { ingestMessage } from '../mime/ingest.js';
import { MessageStructureRefused } from '../mime/structureLimits.js';
import { DISK_RETRY_AFTER_SECONDS, type DiskGuard } from '../platform/diskSpace.js';
import { countAccepted } from '../platform/metrics.js';
import type { AuthContext } from '../policy/apiKeys.js';
import { checkProjectPolicy } from '../policy/projectPolicy.js';
import {
  type LimitSettings,
  type Refusal,
  type UsageFacts,
  usageRefusal,
} from '../policy/usageLimits.js';
import { createTempFileStream, type Spool } from '../spool/spool.js';
import { findIdempotentResponse } from '../store/idempotency.js';
import { BODY_IN_INDEX } from '../store/messageBodies.js';
import type { HoldReason } from '../store/messages.js';
import { indexAnswers, type Queries } from '../store/queries.js';
import { BODY_MAX_LENGTH } from './messageRules.js';
import type { MessageFacts, OutgoingMessage } from './outgoingMessage.js';
import { judgeSmtpMessage } from './smtpMessage.js';
import type { SpooledMessage, SpoolFile, SpoolWriters } from './writers.js';

export interface AcceptDeps {
  /** For reads only: the commit runs on the index writer thread. */
  store: Queries;
  spool: Spool;
  writers: SpoolWriters;
  indexWriter: AcceptanceCommits;
  clock: Clock;
  logger: Logger;
  limits: LimitSettings;
  disk?: DiskGuard | null;
  /** Told once per commit that stored a message due now, so delivery need not wait for its next poll. */
  onDue?: () => void;
}

export interface AcceptOptions {
  source: 'http' | 'smtp';
  idempotencyKey: string | null;
}

/** Composed from JSON (HTTP) or a received message already rewritten; ends held in memory or as a temp file the index writer publishes. */
interface MimeSource {
  id?: string;
  write(id: string, nowMs: number): Promise<SpooledMessage>;
}

export type ReceivedData = { whole: Buffer } | { stream: Readable };

export interface ReceivedOptions {
  recipients: string[];
  maxBytes: number;
  defaultSender: string;
}

interface InitialState {
  status: Status;
  paused: boolean;
  holdReason: HoldReason;
}

/** The status by the transition table's precedence (contract/messageStates.ts): captured, paused, scheduled, else queued. */
export function initialState(auth: AuthContext, message: MessageFacts): InitialState {
  const holdReason: HoldReason = message.paused
    ? 'request'
    : auth.project.paused
      ? 'project'
      : null;
  const paused = holdReason !== null;
  return {
    status: initialStatus({
      sandbox: auth.environment === 'sandbox',
      held: paused,
      scheduled: message.scheduledAt !== null,
    }),
    paused,
    holdReason,
  };
}

export function refusalError(refusal: Refusal): ContractError {
  return new ContractError(refusal.code, {
    message: refusal.message,
    headers:
      refusal.retryAfterSeconds === undefined
        ? undefined
        : { 'Retry-After': String(refusal.retryAfterSeconds) },
  });
}

interface Spooled {
  response: SendAccepted;
  /** null: the body travels in `record`, for the index to keep. */
  file: SpoolFile | null;
  record: AcceptanceRecord;
}

/** The accept pipeline both doors share; it resolves only after both file and index row are durable. */
export class AcceptPipeline {
  private readonly inFlight = new Map<string, Promise<SendAccepted>>();

  constructor(private readonly deps: AcceptDeps) {}

  indexAnswers(): Promise<boolean> {
    return indexAnswers(this.deps.store);
  }

  /** `storage_low` below spool.min_free_bytes: the doors call it before reading a message, the pipeline again before writing. */
  checkDiskSpace(): void {
    if (this.deps.disk?.low)
      throw new ContractError('storage_low', {
        headers: { 'Retry-After': String(DISK_RETRY_AFTER_SECONDS) },
      });
  }

  /** At most one attempt per (project, environment, Idempotency-Key) at a time: a repeat gets the stored 202 (the first body wins). */
  async idempotent(
    auth: AuthContext,
    key: string | null,
    attempt: () => Promise<SendAccepted>,
  ): Promise<SendAccepted> {
    if (key === null) return attempt();
    const formatError = idempotencyKeyError(key);
    if (formatError) throw new ContractError(formatError);
    const slot = `${auth.project.id}\u0000${auth.environment}\u0000${key}`;
    for (;;) {
      const stored = await findIdempotentResponse(
        this.deps.store,
        auth.project.id,
        auth.environment,
        key,
      );
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

  accept(auth: AuthContext, message: OutgoingMessage, opts: AcceptOptions): Promise<SendAccepted> {
    return this.acceptFrom(auth, message, opts, this.composed(message));
  }

  /** An SMTP message: rewritten, spooled, parsed and judged by the Message rules; one not accepted leaves no file behind. */
  async acceptReceived(
    auth: AuthContext,
    received: ReceivedData,
    opts: ReceivedOptions,
  ): Promise<SendAccepted> {
    const { spool, writers, clock } = this.deps;
    this.checkDiskSpace();
    const now = clock.now();
    const id = newMessageId(now);
    const relPath = spool.relativePathFor(id, now);
    const tmpPath = spool.tempPathFor(relPath);
    // No temp file to remove once the message came back held (an lstat per message showed in the SMTP profile) or was adopted.
    let tempFileOurs = true;
    try {
      const options = { id, defaultSender: opts.defaultSender };
      const { parsed: mail, held } = await asRefusal(
        'whole' in received
          ? writers.ingest(received.whole, tmpPath, options)
          : ingestMessage(received.stream, options, createTempFileStream(tmpPath), {
              maxBytes: opts.maxBytes,
              bodyMaxLength: BODY_MAX_LENGTH,
            }).then((parsed) => ({ parsed, held: undefined })),
      );
      if (held) tempFileOurs = false;
      const judged = judgeSmtpMessage(mail, opts.recipients, clock.now());
      if (!mail.complete) throw new Error('a message read only in part passed the rules');
      const source: MimeSource = {
        id,
        write: async () => {
          if (held) return { held, size: mail.size };
          tempFileOurs = false;
          return { relPath, tmpPath, size: mail.size };
        },
      };
      return await this.idempotent(auth, judged.idempotencyKey, () =>
        this.acceptFrom(
          auth,
          judged.facts,
          { source: 'smtp', idempotencyKey: judged.idempotencyKey },
          source,
        ),
      );
    } finally {
      if (tempFileOurs) spool.removeTempSync(tmpPath);
    }
  }

  private async acceptFrom(
    auth: AuthContext,
    facts: MessageFacts,
    opts: AcceptOptions,
    source: MimeSource,
  ): Promise<SendAccepted> {
    await this.checkPolicy(auth, facts);
    const spooled = await this.spool(auth, facts, opts, source);
    const [outcome] = await this.commit([spooled]);
    if (outcome instanceof ContractError) throw outcome;
    return outcome;
  }

  private composed(message: OutgoingMessage): MimeSource {
    return { write: (id, now) => this.deps.writers.write(id, message, now) };
  }

  /** Committed in request order, so a cap that runs out part-way refuses exactly the later ones. */
  async acceptMany(
    auth: AuthContext,
    messages: OutgoingMessage[],
    opts: AcceptOptions,
  ): Promise<(SendAccepted | ContractError)[]> {
    const spooled = await Promise.all(
      messages.map(async (message) => {
        try {
          await this.checkPolicy(auth, message);
          return await this.spool(auth, message, opts, this.composed(message));
        } catch (err) {
          return asContractError(err);
        }
      }),
    );
    const ready = spooled.filter((s): s is Spooled => !(s instanceof ContractError));
    const outcomes = await this.commit(ready);
    return spooled.map((s) => (s instanceof ContractError ? s : outcomes[ready.indexOf(s)]));
  }

  /** The project policy, and the cheap pre-check of the caps where the commit's reads are not one statement anyway (AcceptanceCommits.precheck). */
  private async checkPolicy(auth: AuthContext, message: MessageFacts): Promise<void> {
    const { store, clock, limits, indexWriter } = this.deps;
    if (!limits.enabled) return;
    await checkProjectPolicy(store, auth, message, { suppressions: indexWriter.precheck });
    if (!indexWriter.precheck) return;
    const refusal = await usageRefusal(
      store,
      usageFacts(auth, message, 0),
      auth.project.plan,
      limits,
      clock.now(),
    );
    if (refusal) throw refusalError(refusal);
  }

  private async spool(
    auth: AuthContext,
    message: MessageFacts,
    opts: AcceptOptions,
    source: MimeSource,
  ): Promise<Spooled> {
    const { clock, logger } = this.deps;
    this.checkDiskSpace();
    const now = clock.now();
    const id = source.id ?? newMessageId(now);
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
    let written: SpooledMessage;
    try {
      written = await source.write(id, now);
    } catch (err) {
      if (err instanceof MessageStructureRefused) throw structureError(err);
      logger.error({ err, message_id: id }, 'spool write failed');
      throw new ContractError('server_error');
    }
    const recipients = {
      to: message.to.map((m) => m.email),
      cc: message.cc.map((m) => m.email),
      bcc: message.bcc.map((m) => m.email),
    };
    const record: AcceptanceRecord = {
      message: {
        id,
        project_id: auth.project.id,
        environment: auth.environment,
        source: opts.source,
        status: state.status,
        hold_reason: state.holdReason,
        from_email: message.from.email,
        from_name: message.from.name ?? null,
        recipients: JSON.stringify(recipients),
        subject: message.subject,
        tags: JSON.stringify(message.tags),
        metadata: JSON.stringify(message.metadata),
        category: message.category,
        routing: JSON.stringify(message.routing),
        provider_options: message.providerOptions ? JSON.stringify(message.providerOptions) : null,
        scheduled_at: message.scheduledAt?.at ?? null,
        spool_path: 'held' in written ? BODY_IN_INDEX : written.relPath,
        size_bytes: written.size,
        idempotency_key: opts.idempotencyKey,
        created_at: now,
        updated_at: now,
        next_attempt_at:
          state.status === 'queued'
            ? now
            : state.status === 'scheduled'
              ? message.scheduledAt!.at
              : null,
      },
      body: 'held' in written ? written.held : null,
      idempotency:
        opts.idempotencyKey === null
          ? null
          : { key: opts.idempotencyKey, response: JSON.stringify(response) },
      usage: usageFacts(auth, message, written.size),
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
    };
    return {
      response,
      file: 'held' in written ? null : { relPath: written.relPath, tmpPath: written.tmpPath },
      record,
    };
  }

  /** A refused, duplicate or failed unit removes its own file. */
  private async commit(units: Spooled[]): Promise<(SendAccepted | ContractError)[]> {
    const { spool, indexWriter, logger, onDue } = this.deps;
    const settled = await Promise.allSettled(
      indexWriter.submitMany(
        units.map((u) => ({
          file: u.file && { tmpPath: u.file.tmpPath, finalPath: spool.absolute(u.file.relPath) },
          record: u.record,
        })),
      ),
    );
    if (
      onDue &&
      settled.some(
        (r, i) =>
          r.status === 'fulfilled' &&
          r.value.kind === 'stored' &&
          units[i].record.message.status === 'queued',
      )
    )
      onDue();
    return Promise.all(
      settled.map(async (result, i): Promise<SendAccepted | ContractError> => {
        const unit = units[i];
        const outcome: AcceptanceOutcome | null =
          result.status === 'fulfilled' ? result.value : null;
        if (outcome?.kind === 'stored') {
          const m = unit.record.message;
          // Checked first: at info the line's object would be built for every message and dropped.
          if (logger.isLevelEnabled('debug'))
            logger.debug(
              {
                message_id: m.id,
                project_id: m.project_id,
                status: m.status,
                source: m.source,
                size: m.size_bytes,
              },
              'message accepted',
            );
          countAccepted(m.source, m.environment);
          return unit.response;
        }
        if (unit.file) await spool.removeUnpublished(unit.file).catch(() => undefined);
        if (outcome?.kind === 'duplicate') return JSON.parse(outcome.response) as SendAccepted;
        if (outcome?.kind === 'refused') return refusalError(outcome.refusal);
        logger.error(
          {
            err: result.status === 'rejected' ? result.reason : undefined,
            message_id: unit.response.id,
          },
          'index commit failed',
        );
        return new ContractError('server_error');
      }),
    );
  }
}

function usageFacts(auth: AuthContext, message: MessageFacts, bytes: number): UsageFacts {
  return {
    projectId: auth.project.id,
    environment: auth.environment,
    senderDomain: domainOf(message.from.email),
    category: message.category,
    bytes,
  };
}

function structureError(err: MessageStructureRefused): ContractError {
  return ContractError.validation([err.detail], err.message);
}

async function asRefusal<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    throw err instanceof MessageStructureRefused ? structureError(err) : err;
  }
}

function asContractError(err: unknown): ContractError {
  return err instanceof ContractError ? err : new ContractError('server_error');
}
