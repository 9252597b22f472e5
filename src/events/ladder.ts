/**
 * The retry ladder. `ladderSeconds[i]` is the wait after the (i+1)-th failed attempt, so a
 * delivery gets `ladderSeconds.length + 1` attempts. Each wait is jittered by ±`jitter` (a
 * fraction), so endpoints that failed together are not retried in lockstep. A `Retry-After`
 * (429/503) moves the next attempt later, never earlier, and never beyond the ladder's longest
 * step: a receiver cannot park a delivery for days.
 *
 * Returns the wait in milliseconds, or null when the attempts are spent.
 */
export function retryDelayMs(
  failedAttempts: number,
  ladderSeconds: readonly number[],
  jitter: number,
  retryAfterMs: number | null,
  random: () => number = Math.random,
): number | null {
  if (failedAttempts < 1 || failedAttempts > ladderSeconds.length) return null;
  const base = ladderSeconds[failedAttempts - 1] * 1000;
  const jittered = base * (1 + jitter * (2 * random() - 1));
  const longest = Math.max(...ladderSeconds) * 1000;
  const floor = retryAfterMs === null ? 0 : Math.min(retryAfterMs, longest);
  return Math.round(Math.max(jittered, floor));
}
