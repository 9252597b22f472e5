/**
 * A sliding-window limit, however it is counted: at most `limit` events per `windowMs` per key,
 * and a truthful wait (once it has passed, the next event is admitted). One node counts in its
 * memory (`SlidingWindowLimiter`, rateLimiter.ts), whose answers come at once; several nodes
 * count together on PostgreSQL (`SharedSlidingWindowLimiter`, sharedRateLimiter.ts), whose
 * answers are promises. Answers are `T | Promise<T>` so the in-memory path stays free of
 * promises: a caller may test `typeof answer === 'number'` before awaiting.
 *
 * Both keep each key's last `limit` events as a ring in the order they were written, oldest
 * first; a take is admitted when the oldest place is free (never used, its event given back, or
 * its event past the window). Each event written is numbered (`RateSlot`), so that `reserve`
 * can say which it was and `release` find it again.
 */
export interface RateWindow {
  readonly limit: number;
  readonly windowMs: number;
  /** Records an event unless the key is over its limit; the wait in ms (0 = admitted and recorded). */
  take(key: string): number | Promise<number>;
  /** A take that says where its event went, so that it can be given back (`release`). */
  reserve(key: string): Reservation | Promise<Reservation>;
  /**
   * Gives back an event `reserve` admitted, as if it had not happened: the events written
   * before it move one place newer and the oldest place becomes free, so the ring stays in
   * order and the window exact (a place freed in the middle would keep the ring from coming
   * round to it: a key given one event back behind a kept one would be refused early). Only
   * while the ring still holds the event: once a later take has taken its place over (it had
   * left the window) or the key's window was forgotten, nothing is done. Answers whether it
   * was given back. Costs up to `limit` places rewritten: meant for small limits (sign-ins).
   */
  release(key: string, slot: RateSlot): boolean | Promise<boolean>;
  /** Milliseconds until `key` may have another event; 0 when it may now. Records nothing. */
  waitMs(key: string): number | Promise<number>;
  /** Records an event whatever the wait: one counted after the fact. */
  record(key: string): void | Promise<void>;
}

/**
 * Which event an admitted `reserve` wrote: the key's window (which one: a window forgotten and
 * started afresh is another) and the write's number in it. Meaningful only to the limiter that
 * gave it, for the same key.
 */
export interface RateSlot {
  readonly window: number;
  readonly write: number;
}

/** A reserve's answer: the wait in ms, and where the event went when admitted (wait 0). */
export type Reservation = { readonly waitMs: 0; readonly slot: RateSlot } | { readonly waitMs: number; readonly slot: null };

/** The time a given-back event is left with: before any clock's now, so it has left every window. */
export const RELEASED_AT = Number.MIN_SAFE_INTEGER;
