import { performance } from 'node:perf_hooks';
import type { Logger } from '../log.js';

export interface RepeatedFailureOptions {
  /** Wait before the first retry; doubled after each further failure in a row. */
  minDelayMs: number;
  /** The longest wait between retries. */
  maxDelayMs: number;
  /** While the failure lasts, it is logged at most once per this long. */
  logPeriodMs: number;
}

/**
 * A background loop's failure that repeats until something outside changes (the index
 * refusing writes while the disk is full): retried ever more slowly, up to `maxDelayMs`, and
 * logged when it starts, then at most once per `logPeriodMs` with how many attempts failed
 * meanwhile, and once when it ends. Per attempt it was about ten error lines a second.
 */
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

  /** Records one failed attempt; answers how long to wait before the next. */
  failed(err: unknown): number {
    this.failures++;
    const at = this.now();
    if (at - this.lastLoggedAt >= this.options.logPeriodMs) {
      this.logger.error({ err, failures_in_a_row: this.failures, not_logged: this.unlogged }, this.message);
      this.lastLoggedAt = at;
      this.unlogged = 0;
    } else {
      this.unlogged++;
    }
    return Math.min(this.options.maxDelayMs, this.options.minDelayMs * 2 ** Math.min(30, this.failures - 1));
  }

  /** An attempt succeeded: the failure, if there was one, is over. */
  succeeded(): void {
    if (this.failures === 0) return;
    this.logger.warn({ failures_in_a_row: this.failures }, `${this.message}: recovered`);
    this.failures = 0;
    this.unlogged = 0;
    this.lastLoggedAt = -Infinity;
  }
}
