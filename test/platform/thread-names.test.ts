/**
 * Postern's worker threads carry their names (src/platform/threadName.ts) where `top -H`, `ps -L`,
 * perf and the bench's per-thread CPU (bench/serverThreads.ts) read them: /proc/<pid>/task/<tid>/comm.
 * Node 20 names every thread "node", so without the names the index writer, a spool writer and
 * the webhook thread look alike.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { THREAD_NAMES } from '../../src/platform/threadName.js';
import { createProjectWithKeys, post, validMessage } from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';

const scope = new ProcessScope();
after(() => scope.cleanup());

function threadNames(pid: number): string[] {
  const names: string[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      names.push(readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim());
    } catch {
      // The thread ended meanwhile.
    }
  }
  return names;
}

test('a server names its index writer and spool writer threads; its main thread keeps the process name', {
  skip: process.platform !== 'linux' && 'names are read from /proc',
}, async () => {
  const stateDir = scope.stateDir('postern-thread-names-');
  const { liveKey } = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx));
  const server = await scope.spawn(stateDir, {});
  // One acceptance: every thread the acceptance path uses has started and named itself.
  const sent = await post(server.production, '/v1/send', { key: liveKey, json: validMessage() });
  assert.equal(sent.status, 202, sent.text);
  const pid = server.child.pid!;
  const names = threadNames(pid);
  // (The webhook thread starts only when there is something to dispatch.)
  for (const name of [THREAD_NAMES.indexWriter, THREAD_NAMES.spoolWriter]) {
    assert.ok(names.includes(name), `no thread named ${name} among ${names.join(', ')}`);
  }
  // The main thread's name is the process's; a worker's name never replaces it.
  assert.equal(
    readFileSync(`/proc/${pid}/task/${pid}/comm`, 'utf8').trim(),
    readFileSync(`/proc/${pid}/comm`, 'utf8').trim(),
  );
  assert.ok(
    !Object.values(THREAD_NAMES).includes(
      readFileSync(`/proc/${pid}/comm`, 'utf8').trim() as never,
    ),
  );
  await server.stop();
});
