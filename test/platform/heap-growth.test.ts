import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';

/**
 * A churn like relaying's: a steady live set, and garbage that lives long enough to reach the
 * old generation. Prints the peak size of the heap. Run in a child process so that V8's flag,
 * which is process-wide, touches nothing else.
 */
function peakHeapMb(growthPercent: number | null): number {
  const script = `
    import v8 from 'node:v8';
    import { applyHeapGrowth } from ${JSON.stringify(new URL('../../src/platform/heapGrowth.js', import.meta.url).href)};
    const percent = ${JSON.stringify(growthPercent)};
    if (percent !== null) applyHeapGrowth(percent);
    let live = [];
    let peak = 0;
    for (let i = 0; i < 4e6; i++) {
      live.push({ n: i, s: 'x' + i, a: [i] });
      if (live.length > 300000) live = live.slice(150000);
      if (i % 10000 === 0) peak = Math.max(peak, v8.getHeapStatistics().total_heap_size);
    }
    console.log(peak / 1048576);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  return Number(run.stdout.trim());
}

describe('memory.heap_growth_percent', () => {
  test('set in the running process, it bounds how far the heap grows past its live size', () => {
    const v8Rule = peakHeapMb(null);
    const bounded = peakHeapMb(20);
    // The live set is about 60 MiB here; V8's own rule let the heap reach 200-230 MiB, 20 % about 110.
    assert.ok(
      bounded < v8Rule * 0.7,
      `peak ${bounded.toFixed(0)} MiB with 20 %, ${v8Rule.toFixed(0)} MiB with V8's rule`,
    );
    // 0 hands the decision back to V8.
    const restored = peakHeapMb(0);
    assert.ok(
      restored > bounded * 1.3,
      `peak ${restored.toFixed(0)} MiB with 0, ${bounded.toFixed(0)} MiB with 20 %`,
    );
  });
});
