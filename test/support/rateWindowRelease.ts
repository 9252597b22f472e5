import assert from 'node:assert/strict';
import type { ManualClock } from '../../src/clock.js';
import type { RateSlot, RateWindow } from '../../src/policy/rateWindow.js';
import { seededRandom } from './seededRandom.js';

interface Held {
  at: number;
  slot: RateSlot;
  released: boolean;
}

export interface ReleaseRun {
  admitted: number;
  refused: number;
  released: number;
  /** Releases refused because the event's place had been taken over (or its window forgotten). */
  notReleased: number;
}

/**
 * A seeded run of reserves, releases and clock moves on one key, the calls spread over
 * `windows` (one limiter, or the same shared limiter on several nodes), checked against the
 * events the run kept (admitted, not given back):
 * - a reserve is admitted exactly when fewer than `limit` kept events lie within the window:
 *   never more (release makes no window looser), and never refused for a place given back;
 * - a release is refused only for an event that has left the window (its place may then have
 *   been taken over), never for one still counting.
 */
export async function runReleases(
  windows: RateWindow[],
  clock: ManualClock,
  seed: number,
  steps: number,
): Promise<ReleaseRun> {
  const { limit, windowMs } = windows[0];
  const random = seededRandom(seed);
  const held: Held[] = [];
  const run: ReleaseRun = { admitted: 0, refused: 0, released: 0, notReleased: 0 };
  const keptInWindow = () =>
    held.filter((h) => !h.released && h.at + windowMs > clock.now()).length;
  for (let step = 0; step < steps; step++) {
    const window = windows[step % windows.length];
    const roll = random();
    if (roll < 0.15) {
      clock.advance(1 + Math.floor(random() * windowMs * 0.4));
    } else if (roll < 0.45 && held.some((h) => !h.released)) {
      const candidates = held.filter((h) => !h.released);
      const h = candidates[Math.floor(random() * candidates.length)];
      const released = await window.release('key', h.slot);
      if (released) {
        h.released = true;
        run.released++;
      } else {
        assert.ok(
          h.at + windowMs <= clock.now(),
          `seed ${seed}, step ${step}: the release of an event still in the window (at ${h.at}, now ${clock.now()}) was refused`,
        );
        // Gone from the ring: it no longer counts, as an event that has left.
        h.released = true;
        run.notReleased++;
      }
    } else {
      const before = keptInWindow();
      const answer = await window.reserve('key');
      if (answer.slot !== null) {
        assert.ok(
          before < limit,
          `seed ${seed}, step ${step}: admitted with ${before} kept events in the window (limit ${limit})`,
        );
        held.push({ at: clock.now(), slot: answer.slot, released: false });
        run.admitted++;
      } else {
        assert.ok(answer.waitMs > 0, `seed ${seed}, step ${step}: refused with no wait`);
        assert.equal(
          before,
          limit,
          `seed ${seed}, step ${step}: refused with ${before} kept events in the window (limit ${limit})`,
        );
        run.refused++;
      }
    }
  }
  return run;
}
