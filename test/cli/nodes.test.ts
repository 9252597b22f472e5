/**
 * Nodes are visible (issue 23): a spawned server registers its row (version, listeners as
 * bound) and beats; `postern node list` shows it up, missing once SIGKILLed and 3 heartbeats
 * have passed, stopped after a graceful stop; a second process with a live node's id says so.
 * The reader's clock is moved (POSTERN_CLOCK_OFFSET_MS) to judge a node at a given time.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ConfigError } from '../../src/config/configError.js';
import { buildConfig } from '../../src/config/load.js';
import { repoRoot, runCli } from '../support/postern.js';
import { ProcessScope } from '../support/processes.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';

const processes = new ProcessScope();
after(() => processes.cleanup());

const VERSION = (
  JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }
).version;

/** A state directory and the config its server and CLI share (delivery off, the given heartbeat). */
function nodeState(
  prefix: string,
  heartbeatSeconds: number,
): { stateDir: string; env: Record<string, string> } {
  const stateDir = processes.stateDir(prefix);
  const file = path.join(stateDir, 'test-config.json');
  writeFileSync(
    file,
    JSON.stringify({ delivery: { enabled: false }, node: { heartbeat_seconds: heartbeatSeconds } }),
  );
  return { stateDir, env: { POSTERN_CONFIG: file, POSTERN_STATE_DIR: stateDir } };
}

async function listNodes(env: Record<string, string>): Promise<any[]> {
  const res = await runCli(['node', 'list', '--json'], env);
  assert.equal(res.code, 0, res.stderr + res.stdout);
  return res.json.nodes as any[];
}

/** `node list` by a reader whose clock reads at least `at` (the time it takes to start only adds to it). */
const listNodesAt = (env: Record<string, string>, at: number) =>
  listNodes({ ...env, POSTERN_CLOCK_OFFSET_MS: String(at - Date.now()) });

test('a spawned server is up in node list with its version and listeners, and beats', async () => {
  const { stateDir, env } = nodeState('postern-nodes-kill-', 1);
  const server = await processes.spawn(stateDir, { ...env, POSTERN_NODE_ID: 'node-a' });

  const [node] = await listNodes(env);
  assert.equal(node.id, 'node-a');
  assert.equal(node.state, 'up');
  assert.equal(node.version, VERSION);
  assert.equal(node.pid, server.child.pid);
  assert.equal(node.stopped_at, null);
  assert.deepEqual(
    node.listeners,
    server.listeners.map(({ name, protocol, host, port }) => ({ name, protocol, host, port })),
  );
  assert.ok(
    node.listeners.every((l: { port: number }) => l.port > 0),
    'ports as bound, not the config 0',
  );

  // It beats: last_beat_at moves on while it runs.
  const firstBeat = Date.parse(node.last_beat_at);
  await waitFor(
    async () => Date.parse((await listNodes(env))[0].last_beat_at) > firstBeat,
    HANG_GUARD_MS,
    'a heartbeat',
  );

  const table = await runCli(['node', 'list'], env);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^id\s+state\s+version/);
  assert.match(table.stdout, new RegExp(`^node-a\\s+up\\s+${VERSION.replace(/\./g, '\\.')}`, 'm'));

  assert.equal(node.heartbeat_seconds, 1);
});

test('SIGKILLed, a node is up until 3 of its own heartbeats have passed since its last beat, then missing (never stopped), even for a reader whose config says otherwise', async () => {
  const { stateDir, env } = nodeState('postern-nodes-kill-', 60);
  const server = await processes.spawn(stateDir, { ...env, POSTERN_NODE_ID: 'node-k' });
  await server.kill();
  const [killed] = await listNodes(env);
  const lastBeat = Date.parse(killed.last_beat_at);
  assert.equal(killed.stopped_at, null);
  // Judged by the node's own heartbeat (60 s, so 3 minutes), even by a reader whose config says an hour.
  const readerConfig = path.join(stateDir, 'reader-config.json');
  writeFileSync(
    readerConfig,
    JSON.stringify({ delivery: { enabled: false }, node: { heartbeat_seconds: 3600 } }),
  );
  const reader = { ...env, POSTERN_CONFIG: readerConfig };
  // Now (the kill was moments ago, far within 3 minutes on any machine): up.
  assert.equal(
    (await listNodes(reader))[0].state,
    'up',
    'not missing before its heartbeats ran out',
  );
  // Past 3 of its heartbeats after the last beat: missing.
  const [missing] = await listNodesAt(reader, lastBeat + 3 * 60_000 + 1);
  assert.equal(missing.id, 'node-k');
  assert.equal(missing.state, 'missing');
  assert.equal(missing.stopped_at, null);
});

test('a graceful stop (SIGTERM) shows the node stopped', async () => {
  const { stateDir, env } = nodeState('postern-nodes-stop-', 1);
  const server = await processes.spawn(stateDir, { ...env, POSTERN_NODE_ID: 'node-b' });
  assert.equal((await listNodes(env))[0].state, 'up');
  const stopping = Date.now();
  assert.equal(await server.stop(), 0);
  const stopped = Date.now();
  const [node] = await listNodes(env);
  assert.equal(node.id, 'node-b');
  assert.equal(node.state, 'stopped');
  assert.ok(
    node.stopped_at &&
      Date.parse(node.stopped_at) >= stopping &&
      Date.parse(node.stopped_at) <= stopped,
    `stopped_at ${node.stopped_at}: while it stopped`,
  );
  // Still stopped (never missing) long after its last beat: an hour on.
  assert.equal((await listNodesAt(env, stopped + 3600_000))[0].state, 'stopped');
});

test('a second process with the id of a node that is still beating starts, and warns naming the conflict; after a graceful stop it does not', async () => {
  const { stateDir, env } = nodeState('postern-nodes-twin-', 10);
  const first = await processes.spawn(stateDir, { ...env, POSTERN_NODE_ID: 'twin' });
  // Its row is fresh and not stopped: as a second server on a shared database would find it.
  await first.kill();
  const second = await processes.spawn(stateDir, { ...env, POSTERN_NODE_ID: 'twin' });
  // The log is written as the server starts; read it once it has arrived.
  const warning = await waitFor(
    () =>
      second
        .stderr()
        .split('\n')
        .find((line) => line.includes('another node with node.id')),
    HANG_GUARD_MS,
    'the warning',
  ).catch((err: Error) => assert.fail(`${err.message}: ${second.stderr()}`));
  const logged = JSON.parse(warning);
  assert.equal(logged.node_id, 'twin');
  assert.equal(logged.other_pid, first.child.pid);
  assert.match(logged.msg, /another node with node\.id "twin" beat \d+ s ago and has not stopped/);
  const [node] = await listNodes(env);
  assert.equal(node.pid, second.child.pid, 'the newer process owns the row');
  assert.equal(node.state, 'up');
  assert.equal(await second.stop(), 0);

  const third = await processes.spawn(stateDir, { ...env, POSTERN_NODE_ID: 'twin' });
  assert.equal(await third.stop(), 0);
  // Its whole log, read after it exited.
  assert.doesNotMatch(third.stderr(), /another node with node\.id/);
});

test('node.id defaults to the host name, POSTERN_NODE_ID overrides it; node.heartbeat_seconds is at least 1', () => {
  assert.equal(buildConfig({}, {}).node.id, os.hostname());
  assert.equal(buildConfig({}, {}).node.heartbeat_seconds, 10);
  assert.equal(buildConfig({ node: { id: 'from-file' } }, {}).node.id, 'from-file');
  assert.equal(
    buildConfig({ node: { id: 'from-file' } }, { POSTERN_NODE_ID: 'from-env' }).node.id,
    'from-env',
  );
  assert.throws(
    () => buildConfig({ node: { heartbeat_seconds: 0 } }, {}),
    (err: unknown) => err instanceof ConfigError && err.key === 'node.heartbeat_seconds',
  );
});
