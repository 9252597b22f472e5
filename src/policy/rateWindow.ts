/**
 * A sliding-window limit, however it is counted: at most `limit` events per `windowMs` per key,
 * and a truthful wait (once it has passed, the next event is admitted). One node counts in its
 * memory (`SlidingWindowLimiter`, rateLimiter.ts), whose answers come at once; several nodes
 * count together on PostgreSQL (`SharedSlidingWindowLimiter`, sharedRateLimiter.ts), whose
 * answers are promises. Answers are `T | Promise<T>` so the in-memory path stays free of
 * promises: a caller may test `typeof answer === 'number'` before awaiting.
 */
export interface RateWindow {
  readonly limit: number;
  readonly windowMs: number;
  /** Records an event unless the key is over its limit; the wait in ms (0 = admitted and recorded). */
  take(key: string): number | Promise<number>;
  /** Milliseconds until `key` may have another event; 0 when it may now. Records nothing. */
  waitMs(key: string): number | Promise<number>;
  /** Records an event whatever the wait: one counted after the fact (a failed sign-in). */
  record(key: string): void | Promise<void>;
}
