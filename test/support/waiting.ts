import type { TestContext } from 'node:test';

/**
 * The one bound on a wait in a test: a hang guard, never a claim about speed (tests assert order
 * and outcome; timings belong in `npm run bench`). Generous for a clean clone on a machine at load
 * average 8, where the SQLite half of the suite took 23 minutes and the webhook dispatcher (at
 * SCHED_IDLE) waits for idle CPU by design; a test that needs it has hung, not run slowly.
 */
export const HANG_GUARD_MS = 5 * 60_000;

/** Polls `condition` until it returns a truthy value (returned); throws once `timeoutMs` (a hang guard) has passed. */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  timeoutMs = HANG_GUARD_MS,
  what = 'condition',
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A few scheduler poll intervals of real time. Only where nothing can signal that the work is
 * done: a longer wait (a loaded machine) only makes what follows hold more surely, never fail.
 * To show that something does NOT happen, prefer an ordering signal (test/support/probes.ts).
 */
export const settle = (ms = 250) => new Promise((r) => setTimeout(r, ms));

/** Resources closed after the test, last opened first (Postern before the sinks it relays to). */
export function scope(t: TestContext) {
  const closers: (() => Promise<unknown> | unknown)[] = [];
  t.after(async () => {
    for (const close of closers.reverse()) await close();
  });
  return {
    add<T>(value: T, close: (v: T) => Promise<unknown> | unknown): T {
      closers.push(() => close(value));
      return value;
    },
  };
}

/** A gate a test opens by hand: what waits on `opened` goes on only once the test says so. */
export function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * `promise`'s value, or a failure naming `what` once the hang guard has passed: for work that must
 * finish while the test still holds something back (a lock, an answer), where waiting for what is
 * held back would hang.
 */
export function withinHangGuard<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} (not done after ${HANG_GUARD_MS} ms)`)),
      HANG_GUARD_MS,
    );
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

/**
 * A point `parties` concurrent loops each reach once: `reached()` resolves once all of them have.
 * Holding each node after its first batch until every node has had one makes "the nodes took part
 * together" certain, whatever the machine's speed (unheld, one node can take every batch while
 * another is still connecting).
 */
export function meetingPoint(parties: number): { reached(): Promise<void> } {
  let left = parties;
  const all = gate();
  return {
    reached() {
      if (--left === 0) all.open();
      return all.opened;
    },
  };
}
