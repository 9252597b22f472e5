/**
 * A sliding-window limit: at most `limit` events per `windowMs` per key, each key's last events kept as a ring.
 * Answers are `T | Promise<T>` so the in-memory path (one node) stays free of promises; PostgreSQL's are promises.
 */
export interface RateWindow {
  readonly limit: number;
  readonly windowMs: number;
  /** The wait in ms (0 = admitted and recorded). */
  take(key: string): number | Promise<number>;
  reserve(key: string): Reservation | Promise<Reservation>;
  /**
   * Gives back an event `reserve` admitted: older events move one place newer so the ring stays in order and the
   * window exact (a hole in the middle would refuse early). Costs up to `limit` writes: meant for small limits (sign-ins).
   */
  release(key: string, slot: RateSlot): boolean | Promise<boolean>;
  /** Records nothing. */
  waitMs(key: string): number | Promise<number>;
  /** One counted after the fact, whatever the wait. */
  record(key: string): void | Promise<void>;
}

/** Meaningful only to the limiter that gave it, for the same key (a window started afresh is another). */
export interface RateSlot {
  readonly window: number;
  readonly write: number;
}

/** On PostgreSQL, also the policy generation as the take began: admission.ts checks the cached policy against it. */
export type Reservation = (
  | { readonly waitMs: 0; readonly slot: RateSlot }
  | { readonly waitMs: number; readonly slot: null }
) & { readonly policyGeneration?: number };

/** Before any clock's now, so it has left every window. */
export const RELEASED_AT = Number.MIN_SAFE_INTEGER;
