/**
 * Several Postern nodes on one PostgreSQL (CLUSTER.md) for the cluster tests: real `postern
 * start` processes on a fresh database of the private server, each with its own state directory
 * and node id, and the operator's own connection to that database (as the CLI's).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { systemClock } from '../../src/clock.js';
import { buildConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import type { OperatorContext } from '../../src/operator/context.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import type { SpawnedPostern } from './postern.js';
import { freshDatabase, sharedPostgres, testPool } from './postgres.js';
import { ProcessScope } from './processes.js';

export interface ClusterNode extends SpawnedPostern {
  id: string;
  /** Its SMTP submission listener's port (STARTTLS) on 127.0.0.1. */
  smtp: number;
  /** What it was started with (its config file, state directory and the shared database): the CLI given it acts as this node's operator. */
  env: Record<string, string>;
}

export interface Cluster {
  /** The shared database's URL. */
  url: string;
  nodes: ClusterNode[];
  /** The operator's connection to the shared database, with the nodes' config. */
  ctx: OperatorContext;
  /**
   * Stops `node` (SIGTERM) and starts it again on its state directory, its environment with `env`
   * added (POSTERN_CLOCK_OFFSET_MS: a node whose clock has moved on).
   */
  restart(node: ClusterNode, env?: Record<string, string>): Promise<ClusterNode>;
  /** Stops what is still running, drops the database and removes the state directories. */
  close(): Promise<void>;
}

/**
 * Every node's HTTP production and SMTP submission listeners (ephemeral ports), and request
 * limits no test trips unless it sets its own: on PostgreSQL the windows are the cluster's.
 */
const BASE_CONFIG = {
  listeners: [
    {
      name: 'http-production',
      protocol: 'http',
      environment: 'production',
      host: '127.0.0.1',
      port: 0,
    },
    {
      name: 'smtp-587',
      protocol: 'smtp',
      environment: 'production',
      host: '127.0.0.1',
      port: 0,
      tls: 'starttls',
    },
  ],
  rate_limits: { send_per_key: 1e6, batch_per_key: 1e6, unauthenticated_per_ip: 1e6 },
};

/**
 * One node per id, started together on a fresh, migrated database. `config` (top-level keys
 * replace the base's) is every node's config file and the operator context's config, so a
 * plan it names exists on both sides. `server`: the database is made on that server instead
 * of the test process's shared one (a test that restarts its server has one of its own; the
 * operator's connections then outlive its restarts).
 */
export async function startCluster(
  ids: string[],
  config: Record<string, unknown> = {},
  opts: { server?: string } = {},
): Promise<Cluster> {
  const scope = new ProcessScope();
  const database = await freshDatabase(opts.server ?? (await sharedPostgres()).url);
  const pool = testPool(database.url, 4, { restarts: opts.server !== undefined });
  const close = async () => {
    await scope.cleanup();
    await pool.end();
    await database.drop();
  };
  const settings = { ...BASE_CONFIG, ...config };
  try {
    // Migrated once before the nodes start, so their starts race for nothing.
    await migratePostgres(pool, silentLogger());
    const ctx: OperatorContext = {
      store: postgresQueries(pool),
      clock: systemClock,
      config: buildConfig({ state_dir: '/nonexistent', ...settings }, {}),
      spoolRoot: '/nonexistent',
    };
    const start = async (
      id: string,
      dir: string,
      env: Record<string, string>,
    ): Promise<ClusterNode> => {
      const node = await scope.spawn(dir, env);
      const smtp = node.listeners.find((l) => l.protocol === 'smtp')?.port ?? 0;
      return Object.assign(node, { id, smtp, env });
    };
    const nodes = await Promise.all(
      ids.map(async (id): Promise<ClusterNode> => {
        const dir = scope.stateDir(`postern-${id}-`);
        const file = path.join(dir, 'node.json');
        writeFileSync(file, JSON.stringify(settings));
        return start(id, dir, {
          POSTERN_CONFIG: file,
          POSTERN_STATE_DIR: dir,
          POSTERN_STORE_BACKEND: 'postgres',
          POSTERN_DATABASE_URL: database.url,
          POSTERN_NODE_ID: id,
        });
      }),
    );
    const restart = async (
      node: ClusterNode,
      env: Record<string, string> = {},
    ): Promise<ClusterNode> => {
      await node.stop();
      return start(node.id, node.env.POSTERN_STATE_DIR, { ...node.env, ...env });
    };
    return { url: database.url, nodes, ctx, restart, close };
  } catch (err) {
    await close();
    throw err;
  }
}
