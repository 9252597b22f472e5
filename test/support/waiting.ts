import type { TestContext } from 'node:test';

/** Polls `condition` until it returns a truthy value (returned) or `timeoutMs` passes. */
export async function waitFor<T>(condition: () => T | Promise<T>, timeoutMs = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A few scheduler poll intervals of real time: to show that something does NOT happen. */
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
