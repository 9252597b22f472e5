/**
 * A competing writer on the bench's filesystem, for the duration of a phase: `dd` writing a
 * 300 MB file of zeros, over and over, without fsync. What competes is its dirty page cache:
 * every flush the server under test waits for (fsync, syncfs, the WAL's) queues behind that
 * writeback, as on a self-hoster's VM whose disk also takes logs, backups and databases.
 */
import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tempStateDir } from '../test/support/postern.js';
import { onBenchExit, removeAfterBench } from './benchServer.js';

const FILE_MB = 300;

export interface DiskCompetitor {
  /** Stops the writer, waits for its dirty data to reach the disk (so the next phase does not pay for it), removes its file; MB/s it wrote. */
  stop(): Promise<number>;
}

export function startDiskCompetitor(): DiskCompetitor {
  // In the temp directory the state directories are made in: the same filesystem as theirs.
  const dir = tempStateDir('postern-bench-competitor-');
  removeAfterBench(dir);
  const file = `${dir}/competitor`;
  const started = performance.now();
  // Its own process group (detached), so the shell and its dd stop together; a dot per file written.
  const child = spawn(
    'sh',
    [
      '-c',
      `while :; do dd if=/dev/zero of="$0" bs=1M count=${FILE_MB} status=none && printf .; done`,
      file,
    ],
    {
      detached: true,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let files = 0;
  child.stdout!.on('data', (d: Buffer) => (files += d.length));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const killGroup = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  onBenchExit(killGroup);
  return {
    async stop() {
      const seconds = (performance.now() - started) / 1000;
      killGroup();
      await exited;
      spawnSync('sync', ['-f', dir]);
      rmSync(file, { force: true });
      return Math.round((files * FILE_MB) / seconds);
    },
  };
}
