/** Files are copied, never hard-linked: the spool empties a finished message's file in place to reuse it. */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { copyFile, mkdir, open } from 'node:fs/promises';

const COPY_PARALLEL = 8;
const DIGEST_CHUNK = 256 * 1024;

export async function flush(file: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function digestAndFlush(file: string): Promise<{ size: number; sha256: string }> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const hash = createHash('sha256');
    const buffer = Buffer.allocUnsafe(DIGEST_CHUNK);
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      size += bytesRead;
    }
    await handle.sync();
    return { size, sha256: hash.digest('hex') };
  } finally {
    await handle.close();
  }
}

export async function copyNew(from: string, to: string): Promise<void> {
  await copyFile(from, to, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
}

/** A copy waits for its directory's mkdir, never races it. */
export class Directories {
  private readonly made = new Map<string, Promise<unknown>>();

  constructor(root: string) {
    this.made.set(root, Promise.resolve());
  }

  ensure(dir: string): Promise<unknown> {
    let making = this.made.get(dir);
    if (!making) {
      making = mkdir(dir, { recursive: true, mode: 0o700 });
      this.made.set(dir, making);
    }
    return making;
  }

  deepestFirst(): string[] {
    return [...this.made.keys()].sort((a, b) => b.length - a.length);
  }
}

export async function inParallel<T>(
  items: readonly T[],
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(COPY_PARALLEL, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}
