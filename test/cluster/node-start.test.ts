/**
 * A node on PostgreSQL starting: it opens its whole pool before its listeners open, so a node
 * that answers /readyz serves its first requests on connections already open (docs/scaling.md,
 * "A node's first seconds").
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { get, startTestNodes, type TestPostern } from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';

describe('a node on PostgreSQL', { skip: postgresUnavailable() }, () => {
  let started: { nodes: TestPostern[]; close(): Promise<void> };
  let node: TestPostern;
  let watcher: pg.Client;

  before(async () => {
    started = await startTestNodes(1);
    node = started.nodes[0]!;
    watcher = new pg.Client({ connectionString: node.config.store.postgres.url! });
    await watcher.connect();
  });
  after(async () => {
    await watcher?.end();
    await started?.close();
  });

  test('has every connection of its pool open once it listens, and /readyz answers ready', async () => {
    const { rows } = await watcher.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'postern node-1'",
    );
    assert.equal(node.config.store.postgres.pool_size, 10);
    assert.deepEqual(rows, [{ n: 10 }]);
    const ready = await get(node.production, '/readyz');
    assert.equal(ready.status, 200);
    assert.equal(ready.body.status, 'ready');
  });
});
