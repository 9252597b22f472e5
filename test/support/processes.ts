import { rmSync } from 'node:fs';
import path from 'node:path';
import { systemClock } from '../../src/clock.js';
import { buildConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import type { OperatorContext } from '../../src/operator/context.js';
import { openDatabase } from '../../src/store/db.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { sqliteQueries } from '../../src/store/queries.js';
import { type SpawnedPostern, spawnPostern, tempStateDir } from './postern.js';
import { databaseFor, dropDatabaseFor, testPool, testStore } from './postgres.js';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs operator functions against a state directory's index and closes it again, so a child
 * `postern start` can own the directory afterwards (setting up before spawning).
 */
export async function withClosedIndex<T>(
  stateDir: string,
  fn: (ctx: OperatorContext) => T | Promise<T>,
): Promise<T> {
  const config = buildConfig(
    {
      state_dir: stateDir,
      listeners: [
        {
          name: 'http-production',
          protocol: 'http',
          environment: 'production',
          host: '127.0.0.1',
          port: 0,
        },
      ],
    },
    {},
  );
  if (testStore() === 'postgres') {
    // The state directory's database (the one a spawned server will use), migrated as a node would.
    const pool = testPool((await databaseFor(stateDir)).url, 2);
    try {
      await migratePostgres(pool, silentLogger());
      return await fn({
        store: postgresQueries(pool),
        clock: systemClock,
        config,
        spoolRoot: path.join(stateDir, 'spool'),
      });
    } finally {
      await pool.end();
    }
  }
  const db = openDatabase(stateDir, silentLogger());
  try {
    return await fn({
      store: sqliteQueries(db),
      clock: systemClock,
      config,
      spoolRoot: path.join(stateDir, 'spool'),
    });
  } finally {
    db.close();
  }
}

/** The state directories and child servers of a test file, all removed or killed by `cleanup()`. */
export class ProcessScope {
  private readonly dirs: string[] = [];
  private readonly children: SpawnedPostern[] = [];

  stateDir(prefix: string): string {
    const dir = tempStateDir(prefix);
    this.dirs.push(dir);
    return dir;
  }

  async spawn(...args: Parameters<typeof spawnPostern>): Promise<SpawnedPostern> {
    const child = await spawnPostern(...args);
    this.children.push(child);
    return child;
  }

  async cleanup(): Promise<void> {
    for (const child of this.children) {
      if (child.child.exitCode === null && child.child.signalCode === null) await child.kill();
    }
    for (const dir of this.dirs) {
      await dropDatabaseFor(dir);
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
