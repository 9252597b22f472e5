import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Logger } from '../log.js';
import { observeCommitGroup } from '../platform/metrics.js';
import type { LimitSettings } from '../policy/usageLimits.js';
import type { PendingSpoolFile } from '../spool/publish.js';
import type { AcceptanceGroupStore } from '../store/acceptanceGroups.js';
import type { AcceptanceOutcome, AcceptanceRecord } from './acceptance.js';
import { commitAcceptanceGroup, type GroupAcceptanceResult, type GroupAcceptanceUnit } from './acceptanceGroup.js';

/** Units per group transaction, as the SQLite writer thread groups them. */
const MAX_GROUP = 512;

/**
 * Group transactions in flight at once. One would leave the pool idle while a commit waits for
 * its flush (and a synchronous standby); a few let the next group run its statements meanwhile.
 * Groups of one project still take turns at its row lock, which is what keeps its caps exact.
 */
const DEFAULT_CONCURRENT_GROUPS = 2;

interface Pending {
  file: PendingSpoolFile | null;
  record: AcceptanceRecord;
  resolve: (outcome: AcceptanceOutcome) => void;
  reject: (err: Error) => void;
}

/**
 * A node's acceptance commits through the store's acceptance groups (the shared database's), the
 * twin of the SQLite index writer thread (IndexWriter): units submitted while a group commits wait and go together in the next group,
 * so a busy node shares each flush among many acceptances. Each promise resolves only once its
 * unit is committed durably (commitAcceptanceGroup), which is what a 202 or 250
 * may promise. A large body arrives as a temp file (node-local scratch, not the durable copy):
 * it is streamed into the database in its unit's transaction and removed once the group ends.
 */
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

  submitMany(units: { file: PendingSpoolFile | null; record: AcceptanceRecord }[]): Promise<AcceptanceOutcome>[] {
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

  /** New plans and caps (SIGHUP): groups started from now on judge by them. */
  updateLimits(limits: LimitSettings): void {
    this.limits = limits;
  }

  /**
   * The last group's error, if its commit failed as a whole (the database unreachable, say);
   * null once one commits, or once the database answers as a primary again (a probe, only
   * while there is an error): a node behind a balancer that stops sending it requests while it
   * is not ready would otherwise never commit again to clear it. A probe that does not answer
   * within `timeoutMs` leaves the error.
   */
  async lastWriteError(timeoutMs: number): Promise<string | null> {
    const error = this.lastError;
    if (error === null) return null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answered = await Promise.race([
      this.groups.commitRefusal(),
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (answered === undefined) return error;
    // A group that failed meanwhile has set its own error: that one stands.
    if (answered === null && this.lastError === error) this.lastError = null;
    return answered ?? this.lastError;
  }

  /** Refuses new units and waits for the groups already taken. */
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
    // Read in pieces of the stored piece's size: each read is one piece as it is (no copy to join
    // smaller reads), which keeps a 30 MB body's garbage, and so the node's RSS, down.
    const units: GroupAcceptanceUnit[] = group.map(({ file, record }) =>
      file ? { record, openBody: () => createReadStream(file.tmpPath, { highWaterMark: this.groups.bodyPieceBytes }) } : { record },
    );
    let results: GroupAcceptanceResult[];
    const started = performance.now();
    try {
      results = await commitAcceptanceGroup(this.groups, units, this.limits);
    } catch (err) {
      results = group.map(() => ({ ok: false, error: `commit failed: ${(err as Error).message}` }));
    }
    const failedWhole = results.length > 0 && results.every((r) => !r.ok && r.error.startsWith('commit failed:'));
    if (failedWhole) {
      this.lastError = (results[0] as { error: string }).error;
      this.logger.error({ units: group.length, err: this.lastError }, 'acceptance commit failed; the group is answered with an error');
    } else {
      this.lastError = null;
      // postern_commit_group_size and _duration_seconds, as the SQLite writer thread records them.
      observeCommitGroup(group.length, (performance.now() - started) / 1000);
    }
    // The bodies are in the database (or their units failed): the scratch copies go either way.
    await Promise.all(group.map((p) => (p.file ? rm(p.file.tmpPath, { force: true }) : undefined)));
    group.forEach((p, i) => {
      const r = results[i]!;
      if (r.ok) p.resolve(r.outcome);
      else p.reject(new Error(r.error));
    });
  }
}
