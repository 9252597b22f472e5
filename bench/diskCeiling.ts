/**
 * The disk's own ceiling for what every accept must do to its MIME file: create a temp file,
 * write ~1.5 KB, fsync, close, rename (the spool writer's sequence), on `threads` threads.
 * Measured in the same run as the accept benchmark, because this disk's fsync rate varies.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { removeAfterBench } from './benchServer.js';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

export async function measureDiskCeiling(dir: string, threads: number, seconds: number): Promise<number> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(`${dir}/tmp`, { recursive: true });
  mkdirSync(`${dir}/day`);
  const stopAt = Date.now() + seconds * 1000;
  const counts = await Promise.all(
    Array.from({ length: threads }, (_, i) =>
      new Promise<number>((resolve, reject) => {
        const w = new Worker(new URL(import.meta.url), { workerData: { dir, i, stopAt } });
        w.once('message', resolve);
        w.once('error', reject);
      }),
    ),
  );
  removeAfterBench(dir);
  return counts.reduce((a, b) => a + b, 0) / seconds;
}

if (!isMainThread) {
  const { dir, i, stopAt } = workerData as { dir: string; i: number; stopAt: number };
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
