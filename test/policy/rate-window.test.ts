/**
 * The in-memory sliding window (policy/rateLimiter.ts) giving events back: `reserve` names the
 * event it admitted, `release` takes it out of the ring as if it had not happened, but only
 * while the ring still holds it. (The shared window's twin tests: test/store/postgres-rate-windows.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { SlidingWindowLimiter } from '../../src/policy/rateLimiter.js';
import type { RateSlot, Reservation } from '../../src/policy/rateWindow.js';
import { runReleases } from '../support/rateWindowRelease.js';

const T0 = Date.UTC(2026, 10, 26, 12, 0, 0);
const WINDOW = 1000;

/** The slot of an admitted reservation (fails the test on a refusal). */
function admittedSlot(r: Reservation): RateSlot {
  assert.equal(r.waitMs, 0, 'admitted');
  assert.ok(r.slot !== null);
  return r.slot;
}

describe('the in-memory window: reserve and release', () => {
  test('reserve admits and says where the event went (window, write), or refuses with the wait and no slot, as take does', () => {
    const clock = new ManualClock(T0);
    const w = new SlidingWindowLimiter(2, WINDOW, clock);
    assert.deepEqual(w.reserve('a'), { waitMs: 0, slot: { window: 0, write: 0 } });
    clock.advance(10);
    assert.deepEqual(w.reserve('a'), { waitMs: 0, slot: { window: 0, write: 1 } });
    assert.deepEqual(w.reserve('b'), { waitMs: 0, slot: { window: 1, write: 0 } });
    clock.advance(10);
    assert.deepEqual(w.reserve('a'), { waitMs: WINDOW - 20, slot: null });
    assert.equal(w.take('a'), WINDOW - 20);
  });

  test('an event given back when it is the oldest makes room at once; the next refusal waits for the next oldest', () => {
    const clock = new ManualClock(T0);
    const w = new SlidingWindowLimiter(3, WINDOW, clock);
    const first = admittedSlot(w.reserve('k'));
    clock.advance(100);
    admittedSlot(w.reserve('k'));
    clock.advance(100);
    admittedSlot(w.reserve('k'));
    assert.equal(w.waitMs('k'), WINDOW - 200);
    assert.equal(w.release('k', first), true);
    assert.equal(w.waitMs('k'), 0);
    assert.equal(w.take('k'), 0);
    // Full again: the oldest kept event is the one at T0 + 100.
    assert.equal(w.take('k'), WINDOW - 100);
  });

  test('an event given back from the middle of the ring frees a place at once: the older events move up, and the waits stay those of the kept events', () => {
    const clock = new ManualClock(T0);
    const w = new SlidingWindowLimiter(3, WINDOW, clock);
    admittedSlot(w.reserve('k'));
    clock.advance(100);
    const middle = admittedSlot(w.reserve('k'));
    clock.advance(100);
    admittedSlot(w.reserve('k'));
    assert.equal(w.release('k', middle), true);
    assert.equal(w.take('k'), 0, 'two events kept: room for one');
    assert.equal(w.take('k'), WINDOW - 200, 'full: the oldest kept (T0) leaves first');
    clock.set(T0 + WINDOW);
    assert.equal(w.take('k'), 0);
    assert.equal(w.take('k'), 200, 'then the one at T0 + 200');
  });

  test('a place a later take has taken over is not given back: the later event keeps counting', () => {
    const clock = new ManualClock(T0);
    const w = new SlidingWindowLimiter(2, WINDOW, clock);
    const early = admittedSlot(w.reserve('k'));
    clock.advance(10);
    admittedSlot(w.reserve('k'));
    // The early event leaves; the next take takes its place.
    clock.set(T0 + WINDOW);
    assert.deepEqual(admittedSlot(w.reserve('k')), { window: 0, write: 2 });
    assert.equal(w.release('k', early), false);
    assert.equal(w.take('k'), 10, 'still full: the events at T0 + 10 and T0 + 1000');
  });

  test('a slot of a key forgotten since (idle a whole window) is not given back in the window started afresh', () => {
    const clock = new ManualClock(T0);
    const w = new SlidingWindowLimiter(1, WINDOW, clock);
    const old = admittedSlot(w.reserve('k'));
    clock.advance(5 * WINDOW);
    // Another key's event sweeps the idle ones; k starts afresh in a window of its own.
    assert.equal(w.take('other'), 0);
    assert.deepEqual(admittedSlot(w.reserve('k')), { window: 2, write: 0 });
    assert.equal(w.release('k', old), false);
    assert.equal(w.take('k'), WINDOW);
  });

  test('a slot given for one key is not given back on another', () => {
    const clock = new ManualClock(T0);
    const w = new SlidingWindowLimiter(1, WINDOW, clock);
    const a = admittedSlot(w.reserve('a'));
    admittedSlot(w.reserve('b'));
    assert.equal(w.release('b', a), false);
    assert.equal(w.take('b'), WINDOW);
  });

  test('a key whose newest event was given back is not forgotten while an older one still counts', () => {
    const clock = new ManualClock(T0);
    const w = new SlidingWindowLimiter(2, WINDOW, clock);
    assert.equal(w.take('other'), 0, 'a sweep at T0');
    clock.set(T0 + 500);
    admittedSlot(w.reserve('k'));
    clock.set(T0 + 600);
    assert.equal(w.release('k', admittedSlot(w.reserve('k'))), true);
    // The next sweep, at T0 + 1100: the event at T0 + 500 counts until T0 + 1500.
    clock.set(T0 + 1100);
    assert.equal(w.take('other'), 0);
    assert.equal(w.take('k'), 0, 'one event kept: room for one');
    assert.equal(w.take('k'), 400, 'the event at T0 + 500 still counts');
  });

  for (const [limit, seed] of [
    [1, 1],
    [3, 2],
    [5, 3],
    [5, 4],
    [20, 5],
  ]) {
    test(`release never admits more than the limit in any window, and the window stays exact (limit ${limit}, 3000 random steps, seed ${seed})`, async () => {
      const clock = new ManualClock(T0);
      const run = await runReleases(
        [new SlidingWindowLimiter(limit, WINDOW, clock)],
        clock,
        seed,
        3000,
      );
      // The run did admit, refuse and give back.
      assert.ok(run.admitted > 100 && run.refused > 100 && run.released > 100, JSON.stringify(run));
    });
  }
});
