/**
 * What creating a spool-sized file costs in the bench's temp directory, and a wait for that
 * cost to settle before anything is measured.
 *
 * Why: on a filesystem without a journal (this VM's ext4), ext4 will not reuse an inode freed
 * in the last 60 s (6 minutes while its inode-table block is still dirty) and scans past every
 * such inode on each create (`recently_deleted()` in fs/ext4/ialloc.c). After a test run or an
 * earlier bench removed tens of thousands of files, each create cost 100-700 µs of kernel time
 * instead of 20-55 µs: a third of a core at 1,000 messages/s, every message being one spool
 * file. A bench started then measures the previous run's clean-up, not Postern.
 */

import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { tempStateDir } from '../test/support/postern.js';
import { removeAfterBench, sleep } from './benchServer.js';

/** At or under this, creates cost what they cost on a filesystem with no recent deletions here. */
const SETTLED_US = 60;
/** Enough creates to reach past the first free inodes, as a section's thousands do. */
const PROBE_FILES = 500;
const RETRY_MS = 10_000;
/** Measured here with `sync` after each probe: settled 30 s after 20,000 deletions, 150 s after 100,000 (a full bench's). Past 300 s, the disk is just slow. */
const MAX_WAIT_S = Number(process.env.BENCH_SETTLE_SECONDS ?? 300);

/** Mean wall time of creating, writing (2 KB) and closing one new file, in µs. */
function probeCreate(): number {
  const dir = tempStateDir('postern-create-');
  mkdirSync(dir, { recursive: true });
  // Kept until the bench ends: removing them now would be the very thing this waits out.
  removeAfterBench(dir);
  const data = Buffer.alloc(2048, 'x');
  const started = performance.now();
  for (let i = 0; i < PROBE_FILES; i++) {
    const fd = openSync(`${dir}/${i}.eml`, 'wx', 0o600);
    writeSync(fd, data);
    closeSync(fd);
  }
  return ((performance.now() - started) * 1000) / PROBE_FILES;
}

export interface FileCreation {
  /** Cost of one create at the last probe, µs. */
  create_us: number;
  /** Cost at the first probe, µs. */
  first_create_us: number;
  waited_s: number;
}

/**
 * Probes the create cost; while it is high, flushes dirty inode-table blocks (`sync`, so
 * ext4's window is 60 s, not 6 minutes: the probe's own creates dirty them again), waits and
 * probes again, up to BENCH_SETTLE_SECONDS (default 300). The cost stays flat until the
 * deletions leave the window, then drops at once, so there is no trend to stop on earlier.
 */
export async function settleFileCreation(): Promise<FileCreation> {
  const first = probeCreate();
  let last = first;
  const started = performance.now();
  while (last > SETTLED_US && performance.now() - started < MAX_WAIT_S * 1000) {
    spawnSync('sync');
    await sleep(RETRY_MS);
    last = probeCreate();
  }
  return {
    create_us: Math.round(last),
    first_create_us: Math.round(first),
    waited_s: Math.round((performance.now() - started) / 1000),
  };
}

export function fileCreationLine(f: FileCreation): string {
  const waited =
    f.waited_s > 0
      ? `; ${f.first_create_us} µs at first, waited ${f.waited_s} s for earlier deletions to age out`
      : '';
  const unsettled =
    f.create_us > SETTLED_US ? ` (above ${SETTLED_US} µs: the figures below carry that cost)` : '';
  return `file create (2 KB, bench temp dir): ${f.create_us} µs${waited}${unsettled}`;
}
