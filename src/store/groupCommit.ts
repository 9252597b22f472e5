import type { Db } from './db.js';

interface Pending {
  dirs: string[];
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/**
 * Group commit: acceptances that arrive while a commit is in flight share the next one, so
 * one directory fsync and one WAL fsync cover many messages. Each unit of work runs in its
 * own savepoint: a unit that throws is rolled back alone and the others still commit.
 */
export class GroupCommitter {
  private pending: Pending[] = [];
  private flushing = false;
  private readonly runUnit: (work: () => unknown) => unknown;

  constructor(
    private readonly db: Db,
    private readonly syncDirs: (dirs: Iterable<string>) => Promise<void>,
    private readonly maxBatch = 256,
  ) {
    this.runUnit = db.transaction((work: () => unknown) => work());
  }

  /** Runs `work` inside the next shared transaction, after `dirs` are fsynced; resolves once committed. */
  submit<T>(dirs: string[], work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ dirs, work, resolve: resolve as (v: unknown) => void, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flushLoop());
      }
    });
  }

  private async flushLoop(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, this.maxBatch);
        await this.flush(batch);
      }
    } finally {
      this.flushing = false;
    }
  }

  private async flush(batch: Pending[]): Promise<void> {
    try {
      await this.syncDirs(new Set(batch.flatMap((p) => p.dirs)));
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.db.transaction(() => {
        for (const p of batch) {
          try {
            outcomes.push({ ok: true, value: this.runUnit(p.work) });
          } catch (error) {
            outcomes.push({ ok: false, error });
          }
        }
      }).immediate();
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    batch.forEach((p, i) => {
      const o = outcomes[i];
      if (o.ok) p.resolve(o.value);
      else p.reject(o.error);
    });
  }
}
