import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Logger } from '../log.js';
import { observeCommitGroup } from '../platform/metrics.js';
import type { LimitSettings } from '../policy/usageLimits.js';
import type { PendingSpoolFile } from '../spool/publish.js';
import type { AcceptanceGroupStore } from '../store/acceptanceGroups.js';
import type { AcceptanceOutcome, AcceptanceRecord } from './acceptance.js';
import {
  commitAcceptanceGroup,
  type GroupAcceptanceResult,
  type GroupAcceptanceUnit,
} from './acceptanceGroup.js';

const MAX_GROUP = 512;

/** A few let the next group run its statements while one waits for its flush; a project's row lock keeps its caps exact. */
const DEFAULT_CONCURRENT_GROUPS = 2;

interface Pending {
  file: PendingSpoolFile | null;
  record: AcceptanceRecord;
  resolve: (outcome: AcceptanceOutcome) => void;
  reject: (err: Error) => void;
}

/** PostgreSQL's twin of the SQLite index writer thread: group commits, each promise resolved once its unit is durable. */
export class AcceptanceGroupWriter {
  private queue: Pending[] = [];
  private running = 0;
  private closed = false;
  private idle: (() => void) | null = null;
  private lastError: string | null = null;

  constructor(
    private readonly groups: AcceptanceGroupStore,
    private limits: LimitSettings,
    private readonly logger: Logger,
    private readonly concurrentGroups = DEFAULT_CONCURRENT_GROUPS,
  ) {}

  submitMany(
    units: { file: PendingSpoolFile | null; record: AcceptanceRecord }[],
  ): Promise<AcceptanceOutcome>[] {
    const promises = units.map(
      ({ file, record }) =>
        new Promise<AcceptanceOutcome>((resolve, reject) => {
          if (this.closed) return reject(new Error('acceptance writer closed'));
          this.queue.push({ file, record, resolve, reject });
        }),
    );
    // After this tick's other submissions: they join the same group.
    queueMicrotask(() => this.startGroups());
    return promises;
  }

  updateLimits(limits: LimitSettings): void {
    this.limits = limits;
  }

  /** Cleared by a commit, or by a probe once the database answers as a primary: a node out of its balancer would not commit again. */
  async lastWriteError(timeoutMs: number): Promise<string | null> {
    const error = this.lastError;
    if (error === null) return null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answered = await Promise.race([
      this.groups.commitRefusal(),
      new Promise<undefined>(
        (resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)),
      ),
    ]);
    clearTimeout(timer);
    if (answered === undefined) return error;
    // A group that failed meanwhile has set its own error: that one stands.
    if (answered === null && this.lastError === error) this.lastError = null;
    return answered ?? this.lastError;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.running === 0 && this.queue.length === 0) return;
    await new Promise<void>((resolve) => (this.idle = resolve));
  }

  private startGroups(): void {
    while (this.running < this.concurrentGroups && this.queue.length > 0) {
      const group = this.queue.splice(0, MAX_GROUP);
      this.running += 1;
      void this.commit(group).finally(() => {
        this.running -= 1;
        if (this.queue.length > 0) this.startGroups();
        else if (this.running === 0) this.idle?.();
      });
    }
  }

  private async commit(group: Pending[]): Promise<void> {
    // Pieces of the stored piece's size: no copy to join smaller reads, which keeps a large body's garbage (and RSS) down.
    const units: GroupAcceptanceUnit[] = group.map(({ file, record }) =>
      file
        ? {
            record,
            openBody: () =>
              createReadStream(file.tmpPath, { highWaterMark: this.groups.bodyPieceBytes }),
          }
        : { record },
    );
    let results: GroupAcceptanceResult[];
    const started = performance.now();
    try {
      results = await commitAcceptanceGroup(this.groups, units, this.limits);
    } catch (err) {
      results = group.map(() => ({ ok: false, error: `commit failed: ${(err as Error).message}` }));
    }
    const failedWhole =
      results.length > 0 && results.every((r) => !r.ok && r.error.startsWith('commit failed:'));
    if (failedWhole) {
      this.lastError = (results[0] as { error: string }).error;
      this.logger.error(
        { units: group.length, err: this.lastError },
        'acceptance commit failed; the group is answered with an error',
      );
    } else {
      this.lastError = null;
      observeCommitGroup(group.length, (performance.now() - started) / 1000);
    }
    await Promise.all(group.map((p) => (p.file ? rm(p.file.tmpPath, { force: true }) : undefined)));
    group.forEach((p, i) => {
      const r = results[i]!;
      if (r.ok) p.resolve(r.outcome);
      else p.reject(new Error(r.error));
    });
  }
}
