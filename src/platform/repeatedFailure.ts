import { performance } from 'node:perf_hooks';
import type { Logger } from '../log.js';

export interface RepeatedFailureOptions {
  /** Doubled after each further failure in a row. */
  minDelayMs: number;
  maxDelayMs: number;
  logPeriodMs: number;
}

/** A failure that repeats until something outside changes (a full disk): retried ever more slowly and logged once per period, not per attempt. */
export class RepeatedFailure {
  private failures = 0;
  private unlogged = 0;
  private lastLoggedAt = -Infinity;

  constructor(
    private readonly logger: Logger,
    private readonly message: string,
    private readonly options: RepeatedFailureOptions,
    private readonly now: () => number = () => performance.now(),
  ) {}

  failed(err: unknown): number {
    this.failures++;
    const at = this.now();
    if (at - this.lastLoggedAt >= this.options.logPeriodMs) {
      this.logger.error(
        { err, failures_in_a_row: this.failures, not_logged: this.unlogged },
        this.message,
      );
      this.lastLoggedAt = at;
      this.unlogged = 0;
    } else {
      this.unlogged++;
    }
    return Math.min(
      this.options.maxDelayMs,
      this.options.minDelayMs * 2 ** Math.min(30, this.failures - 1),
    );
  }

  succeeded(): void {
    if (this.failures === 0) return;
    this.logger.warn({ failures_in_a_row: this.failures }, `${this.message}: recovered`);
    this.failures = 0;
    this.unlogged = 0;
    this.lastLoggedAt = -Infinity;
  }
}
