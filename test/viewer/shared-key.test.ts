/**
 * The viewer signing key of several nodes on one PostgreSQL: one key in the database, whichever
 * node (or command) needs it first, so a link made through any of them opens on every node; no
 * node keeps a key file of its own, and one upgraded with its `viewer.key` brings that key in.
 * Real PostgreSQL, real servers, real CLI. (One SQLite node's key file: viewer.test.ts.)
 */
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type pg from 'pg';
import { pino } from 'pino';
import type { Logger } from '../../src/log.js';
import { silentLogger } from '../../src/log.js';
import { viewerSecret } from '../../src/policy/viewerKey.js';
import { viewerToken, viewerTokenValid } from '../../src/policy/viewerTokens.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { tempDirs } from '../support/hooks.js';
import {
  cliEnv,
  createProjectWithKeys,
  post,
  runCli,
  startTestNodes,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  sharedPostgres,
  testPool,
} from '../support/postgres.js';
import { sleep } from '../support/processes.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

const stateDir = tempDirs('postern-viewer-key-');
const MESSAGE = `m.${'0'.repeat(26)}`;
const HOUR = 3_600_000;

/** A logger whose lines are kept, parsed, for the test to read. */
function recordingLogger(): {
  logger: Logger;
  lines: { level: number; msg: string; file?: string }[];
} {
  const lines: { level: number; msg: string; file?: string }[] = [];
  return {
    lines,
    logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
  };
}

/** A key file as an earlier node left it in its state directory. */
function keyFile(dir: string, key: Buffer): string {
  const file = path.join(dir, 'viewer.key');
  writeFileSync(file, key.toString('hex'), { mode: 0o600 });
  return file;
}

/** Nodes' own store handles (a pool each, as separate processes would have) on one migrated database, and a state directory each. */
interface Handles {
  database: FreshDatabase;
  nodes: { pool: pg.Pool; store: ReturnType<typeof postgresQueries>; dir: string }[];
  close(): Promise<void>;
}

async function handles(count: number): Promise<Handles> {
  const database = await freshDatabase((await sharedPostgres()).url);
  const nodes = Array.from({ length: count }, () => {
    const pool = testPool(database.url, 2);
    return { pool, store: postgresQueries(pool), dir: stateDir() };
  });
  await migratePostgres(nodes[0].pool, silentLogger());
  return {
    database,
    nodes,
    async close() {
      await Promise.all(nodes.map((n) => n.pool.end()));
      await database.drop();
    },
  };
}

const hex = (b: Buffer) => b.toString('hex');

describe('the viewer signing key on PostgreSQL', { skip: postgresUnavailable() }, () => {
  test('nodes starting together on a database without a key agree on one: one row, one node says it created it, no key file written', async () => {
    const h = await handles(4);
    try {
      const logs = h.nodes.map(() => recordingLogger());
      const keys = await Promise.all(
        h.nodes.map((n, i) => viewerSecret(n.store, n.dir, logs[i].logger)),
      );
      assert.equal(keys[0].length, 32);
      assert.deepEqual(keys.map(hex), Array(4).fill(hex(keys[0])));
      const rows = await h.nodes[0].pool.query<{ secret: Buffer }>('SELECT secret FROM viewer_key');
      assert.deepEqual(
        rows.rows.map((r) => hex(r.secret)),
        [hex(keys[0])],
      );
      assert.deepEqual(
        logs.flatMap((l) => l.lines.map((line) => line.msg)),
        ['viewer signing key created in the shared database'],
      );
      for (const n of h.nodes)
        assert.equal(existsSync(path.join(n.dir, 'viewer.key')), false, `${n.dir}: no key file`);

      // A link signed by one node verifies on every other, and a node started later reads the same key.
      const token = viewerToken(keys[0], MESSAGE, Date.now() + HOUR);
      for (const key of keys) assert.equal(viewerTokenValid(key, MESSAGE, token, Date.now()), true);
      const late = recordingLogger();
      assert.equal(
        hex(await viewerSecret(h.nodes[1].store, stateDir(), late.logger)),
        hex(keys[0]),
      );
      assert.deepEqual(late.lines, []);
    } finally {
      await h.close();
    }
  });

  test("nodes whose first insert waits on another node's uncommitted key all return that key once it commits", async () => {
    const h = await handles(3);
    const first = await h.nodes[0].pool.connect();
    try {
      const key = Buffer.alloc(32, 0xab);
      await first.query('BEGIN');
      await first.query('INSERT INTO viewer_key (id, secret, created_at) VALUES (1, $1, 1)', [key]);
      // Each sees no key yet (uncommitted), offers its own, and waits on the row's primary key.
      const waiting = h.nodes.map((n) => viewerSecret(n.store, n.dir, silentLogger()));
      const deadline = Date.now() + HANG_GUARD_MS;
      const blocked = async () =>
        (
          await h.nodes[1].pool.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
          )
        ).rows[0].n;
      while ((await blocked()) < 3 && Date.now() < deadline) await sleep(20);
      assert.equal(await blocked(), 3, 'the three inserts wait on the first');
      await first.query('COMMIT');
      assert.deepEqual((await Promise.all(waiting)).map(hex), Array(3).fill(hex(key)));
      const rows = await h.nodes[1].pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM viewer_key',
      );
      assert.equal(rows.rows[0].n, 1);
    } finally {
      first.release();
      await h.close();
    }
  });

  test('a node upgraded with its own viewer.key brings that key into a database without one: links it signed open on every node; a node with another file is warned', async () => {
    const h = await handles(3);
    try {
      const [upgraded, joining, stray] = h.nodes;
      const old = Buffer.alloc(32, 0x5a);
      const file = keyFile(upgraded.dir, old);
      const linkBefore = viewerToken(old, MESSAGE, Date.now() + HOUR);

      const log = recordingLogger();
      assert.equal(hex(await viewerSecret(upgraded.store, upgraded.dir, log.logger)), hex(old));
      assert.deepEqual(
        log.lines.map((l) => [l.level, l.msg, l.file]),
        [
          [
            30,
            'viewer signing key imported from this file into the shared database: links signed with it open on every node; the file is no longer read',
            file,
          ],
        ],
      );
      assert.equal(existsSync(file), true, 'the file is left where it was');

      const joined = await viewerSecret(joining.store, joining.dir, silentLogger());
      assert.equal(
        viewerTokenValid(joined, MESSAGE, linkBefore, Date.now()),
        true,
        'a link handed out before the upgrade opens on another node',
      );
      assert.equal(existsSync(path.join(joining.dir, 'viewer.key')), false);

      // Another node kept a key of its own: the shared one is used, and the file is named.
      const strayFile = keyFile(stray.dir, Buffer.alloc(32, 0x11));
      const strayLog = recordingLogger();
      assert.equal(hex(await viewerSecret(stray.store, stray.dir, strayLog.logger)), hex(old));
      assert.deepEqual(
        strayLog.lines.map((l) => [l.level, l.msg, l.file]),
        [
          [
            40,
            "this file is not the viewer signing key the nodes share (the database's): links signed with it no longer open; remove it",
            strayFile,
          ],
        ],
      );
      // The imported file itself is the shared key: nothing to say at the next start.
      const again = recordingLogger();
      await viewerSecret(upgraded.store, upgraded.dir, again.logger);
      assert.deepEqual(again.lines, []);
    } finally {
      await h.close();
    }
  });

  test('a viewer.key that is not a key, on a database without one, stops the start and names the file', async () => {
    const h = await handles(1);
    try {
      const file = path.join(h.nodes[0].dir, 'viewer.key');
      writeFileSync(file, 'not a key\n', { mode: 0o600 });
      await assert.rejects(viewerSecret(h.nodes[0].store, h.nodes[0].dir, silentLogger()), {
        message: `${file} is not a viewer key (64 hex digits); remove it to create a new one (old links stop working)`,
      });
      const rows = await h.nodes[0].pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM viewer_key',
      );
      assert.equal(rows.rows[0].n, 0);
    } finally {
      await h.close();
    }
  });

  describe('two servers on one database', () => {
    let cluster: Awaited<ReturnType<typeof startTestNodes>>;
    let a: TestPostern;
    let b: TestPostern;
    before(async () => {
      cluster = await startTestNodes(2);
      [a, b] = cluster.nodes;
    });
    after(() => cluster?.close());

    test("a link made by postern message link on node A's configuration opens on node A and on node B; neither keeps a key file", async () => {
      const { liveKey } = await createProjectWithKeys(a.ctx, 'viewer cluster');
      const sent = await post(a.production, '/v1/send', {
        key: liveKey,
        json: validMessage({ subject: 'Shared link' }),
      });
      assert.equal(sent.status, 202, sent.text);
      const id = sent.body.id as string;
      const config = path.join(a.stateDir, 'link-config.json');
      writeFileSync(
        config,
        JSON.stringify({ state_dir: a.stateDir, viewer: { base_url: a.production } }),
      );
      const link = await runCli(['message', 'link', id, '--expires', '1h', '--json'], {
        ...cliEnv(a),
        POSTERN_CONFIG: config,
      });
      assert.equal(link.code, 0, link.stdout + link.stderr);
      const url = link.json.url as string;
      assert.ok(url.startsWith(`${a.production}/view/${id}/`), url);

      for (const base of [a.production, b.production]) {
        const res = await fetch(url.replace(a.production, base), {
          signal: AbortSignal.timeout(HANG_GUARD_MS),
        });
        const page = await res.text();
        assert.equal(res.status, 200, `${base}: ${page}`);
        assert.match(page, /<h1>Shared link<\/h1>/);
      }
      for (const node of [a, b])
        assert.equal(
          existsSync(path.join(node.stateDir, 'viewer.key')),
          false,
          `${node.stateDir}: no key file`,
        );
    });
  });
});
