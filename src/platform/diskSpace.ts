import { statfsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import type { Logger } from '../log.js';

export function defaultMinFreeBytes(totalBytes: number): number {
  return Math.min(1024 ** 3, Math.floor(totalBytes * 0.05));
}

/** Acceptance resumes by itself within this. */
export const DISK_CHECK_MS = 1000;
export const DISK_RETRY_AFTER_SECONDS = 30;

export interface DiskState {
  free_bytes: number;
  total_bytes: number;
  min_free_bytes: number;
  low: boolean;
}

/** Free space read on a timer, so the accept path reads a field; below the minimum new mail is refused before the disk is full. */
export class DiskGuard {
  private current: DiskState;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly dir: string,
    private readonly configuredMinFree: number | null,
    private readonly logger: Logger,
  ) {
    this.current = this.stateOf(statfsSync(dir));
    if (this.current.low) this.logLow();
  }

  start(): void {
    this.timer ??= setInterval(() => void this.check(), DISK_CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  get state(): DiskState {
    return this.current;
  }

  get low(): boolean {
    return this.current.low;
  }

  async check(): Promise<DiskState> {
    let next: DiskState;
    try {
      next = this.stateOf(await statfs(this.dir));
    } catch (err) {
      // Keep the last reading: a failing statfs says nothing about the space.
      this.logger.warn({ err }, 'could not read the free space of the state directory');
      return this.current;
    }
    const was = this.current.low;
    this.current = next;
    if (next.low && !was) this.logLow();
    if (!next.low && was)
      this.logger.info(
        { free_bytes: next.free_bytes, min_free_bytes: next.min_free_bytes },
        'disk space is back above spool.min_free_bytes: accepting new mail again',
      );
    return next;
  }

  private stateOf(fs: { bavail: number; blocks: number; bsize: number }): DiskState {
    const free = fs.bavail * fs.bsize;
    const total = fs.blocks * fs.bsize;
    const min = this.configuredMinFree ?? defaultMinFreeBytes(total);
    return { free_bytes: free, total_bytes: total, min_free_bytes: min, low: free < min };
  }

  private logLow(): void {
    this.logger.warn(
      { free_bytes: this.current.free_bytes, min_free_bytes: this.current.min_free_bytes },
      'free disk space is below spool.min_free_bytes: refusing new mail (HTTP 503 storage_low, SMTP 452 4.3.1) until space is freed',
    );
  }
}
