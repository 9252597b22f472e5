/**
 * Nodes in the console (issue 23): `GET /nodes` for owners and members, the same answer as
 * `postern node list --json`, validated against the console document; `postern_node_info` on
 * /metrics; and the janitor forgetting nodes stopped for more than 7 days (a ManualClock).
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { nodeList } from '../../src/operator/nodes.js';
import { consoleWorld, expectStatus } from '../support/console.js';
import { repoRoot, runCli, startTestPostern, tempStateDir } from '../support/postern.js';
import { parseExposition } from '../support/prometheusText.js';
import { scope } from '../support/waiting.js';

const VERSION = (
  JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }
).version;
const DAY = 86_400_000;

test('GET /nodes lists this node up, with its version and listeners as bound, for an owner and a member alike; the CLI prints the same', async (t) => {
  const s = scope(t);
  const w = s.add(await consoleWorld({ config: { node: { id: 'console-node' } } }), (x) =>
    x.p.close(),
  );
  const body = expectStatus(await w.owner.get('/nodes'), 200);
  assert.equal(body.nodes.length, 1);
  const [node] = body.nodes;
  assert.equal(node.heartbeat_seconds, 10);
  assert.equal(node.id, 'console-node');
  assert.equal(node.state, 'up');
  assert.equal(node.version, VERSION);
  assert.equal(node.pid, process.pid);
  assert.deepEqual(
    node.listeners,
    w.p.running.listeners.map(({ name, protocol, host, port }) => ({ name, protocol, host, port })),
  );
  // The node beats every 10 s while the reads run (seconds apart on a busy machine): the three
  // readers agree on everything but the latest beat, which only moves forward.
  const beatless = (list: { nodes: Array<{ last_beat_at: string }> }) =>
    list.nodes.map(({ last_beat_at: _, ...rest }) => rest);
  const beat = (list: { nodes: Array<{ last_beat_at: string }> }) =>
    Date.parse(list.nodes[0].last_beat_at);
  const asMember = expectStatus(await w.member.get('/nodes'), 200);
  assert.deepEqual(beatless(asMember), beatless(body));
  assert.ok(beat(asMember) >= beat(body));

  const cli = await runCli(['node', 'list', '--json'], { POSTERN_STATE_DIR: w.p.stateDir });
  assert.equal(cli.code, 0, cli.stderr);
  assert.deepEqual(beatless(cli.json), beatless(body));
  assert.ok(beat(cli.json) >= beat(asMember));
});

test('/metrics names the node: postern_node_info{node_id,version} 1', async (t) => {
  const s = scope(t);
  const p = s.add(
    await startTestPostern({ console: true, config: { node: { id: 'metrics-node' } } }),
    (x) => x.close(),
  );
  const res = await fetch(`${p.console}/metrics`);
  assert.equal(res.status, 200);
  const series = parseExposition(await res.text());
  assert.equal(series.get(`postern_node_info{node_id=metrics-node,version=${VERSION}}`), 1);
});

test('the janitor prunes nodes stopped for more than 7 days, and keeps the recently stopped and the running', async (t) => {
  const stateDir = tempStateDir();
  t.after(() => rmSync(stateDir, { recursive: true, force: true }));
  const T0 = Date.parse('2026-03-02T09:00:00Z');
  const clock = new ManualClock(T0);
  const run = async (id: string) =>
    (await startTestPostern({ clock, stateDir, config: { node: { id } } })).close();
  await run('retired');
  clock.set(T0 + 2 * DAY);
  await run('resting');

  // Eight days after the first stopped: the prune at start forgets it; the other stopped six days ago.
  clock.set(T0 + 8 * DAY);
  const p = await startTestPostern({ clock, stateDir, config: { node: { id: 'current' } } });
  try {
    const nodes = (await nodeList(p.ctx)).nodes;
    assert.deepEqual(
      nodes.map((n) => [n.id, n.state]),
      [
        ['current', 'up'],
        ['resting', 'stopped'],
      ],
    );
    assert.equal(nodes[1].stopped_at, new Date(T0 + 2 * DAY).toISOString());
  } finally {
    await p.close();
  }
});
