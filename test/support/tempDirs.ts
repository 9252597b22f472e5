import { rmSync } from 'node:fs';
import { after } from 'node:test';
import { tempStateDir } from './postern.js';

/**
 * Called at a test file's top level: a maker of temp directories, each removed once the file's
 * tests are done.
 */
export function tempDirs(prefix: string): () => string {
  const made: string[] = [];
  after(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = tempStateDir(prefix);
    made.push(dir);
    return dir;
  };
}
