/** What a test file or suite sets up in node:test's hooks and takes down after its tests. */
import { rmSync } from 'node:fs';
import { after, before } from 'node:test';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  startTestPostern,
  type TestPostern,
  tempStateDir,
} from './postern.js';

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

/**
 * Called in a describe block: a server with one project, started before the block's tests and
 * closed after them; `ready` receives both once started.
 */
export function serverWithProject(
  projectName: string,
  ready: (p: TestPostern, proj: ProjectWithKeys) => void,
): void {
  let started: TestPostern | undefined;
  before(async () => {
    started = await startTestPostern();
    ready(started, await createProjectWithKeys(started.ctx, projectName));
  });
  after(async () => started?.close());
}
