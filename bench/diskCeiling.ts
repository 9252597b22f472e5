/**
 * The disk's own ceilings, measured in the same run as the accept benchmark because this
 * disk's flush rate varies: one fsync per file (create, write ~1.5 KB, fsync, close, rename on
 * `threads` threads: what the spool does without the syncfs addon), and the spool's group
 * publish (below).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { publishSpoolFiles } from '../src/spool/publish.js';
import { loadSyncFilesystem } from '../src/spool/syncFilesystem.js';
import { removeAfterBench } from './benchServer.js';

export async function measureDiskCeiling(
  dir: string,
  threads: number,
  seconds: number,
): Promise<number> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(`${dir}/tmp`, { recursive: true });
  mkdirSync(`${dir}/day`);
  const counts = await Promise.all(
    Array.from(
      { length: threads },
      (_, i) =>
        new Promise<number>((resolve, reject) => {
          // Each thread times itself from when it is ready: starting a worker (loading this
          // module's imports) took longer than the whole window on a slow moment, which read 0.
          const w = new Worker(new URL(import.meta.url), { workerData: { dir, i, seconds } });
          w.once('message', resolve);
          w.once('error', reject);
        }),
    ),
  );
  removeAfterBench(dir);
  return counts.reduce((a, b) => a + b, 0) / seconds;
}

if (!isMainThread) {
  const { dir, i, seconds } = workerData as { dir: string; i: number; seconds: number };
  const stopAt = Date.now() + seconds * 1000;
  const data = Buffer.alloc(1500, 'x');
  let n = 0;
  while (Date.now() < stopAt) {
    const tmp = `${dir}/tmp/${i}.${n}`;
    const fd = openSync(tmp, 'wx', 0o600);
    writeSync(fd, data);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, `${dir}/day/${i}.${n}.eml`);
    n++;
  }
  parentPort!.postMessage(n);
}

/**
 * The disk's ceiling for the spool's actual sequence: groups of `groupSize` temp files written,
 * then published as the index writer does (spool/publish.ts: renames, then one syncfs), on
 * one thread. The SQLite commit that follows each group is not included.
 */
export function measureGroupCeiling(dir: string, groupSize: number, seconds: number): number {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(`${dir}/tmp`, { recursive: true });
  const syncFilesystem = loadSyncFilesystem();
  const data = Buffer.alloc(1500, 'x');
  const stopAt = Date.now() + seconds * 1000;
  let n = 0;
  while (Date.now() < stopAt) {
    const group = Array.from({ length: groupSize }, (_, i) => {
      const tmpPath = `${dir}/tmp/${n}.${i}`;
      const fd = openSync(tmpPath, 'wx', 0o600);
      writeSync(fd, data);
      closeSync(fd);
      return { tmpPath, finalPath: `${dir}/day/${n}.${i}.eml` };
    });
    publishSpoolFiles(group, syncFilesystem);
    n++;
  }
  removeAfterBench(dir);
  return (n * groupSize) / seconds;
}
