import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { silentLogger } from '../../src/log.js';
import { getApiKey, insertApiKey, shortenApiKeyExpiry } from '../../src/store/apiKeys.js';
import { apiKeyLastUsed, recordApiKeyUse } from '../../src/store/apiKeyUsage.js';
import { openDatabase } from '../../src/store/db.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { insertProject } from '../../src/store/projects.js';
import { type Queries, sqliteQueries } from '../../src/store/queries.js';
import { tempDirs } from '../support/hooks.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  sharedPostgres,
  testPool,
} from '../support/postgres.js';

/**
 * The API-key statements that once used SQLite's two-argument MAX and MIN (not PostgreSQL's):
 * the same answers on both engines. A key's rotation grace only ever brings its expiry forward;
 * a key's last use only ever moves later.
 */

const stateDir = tempDirs('postern-key-statements-');
const NOW = Date.UTC(2026, 10, 26, 12, 0, 0);
const DAY = 86_400_000;

async function newKey(q: Queries, id: string, expiresAt: number | null): Promise<void> {
  await insertApiKey(q, {
    id,
    project_id: 'p.keys',
    mode: 'live',
    key_hash: createHash('sha256').update(id).digest(),
    hint: 'abcd',
    created_at: NOW,
    expires_at: expiresAt,
  });
}

const engines: {
  name: string;
  skip: string | false;
  open: () => Promise<{ q: Queries; close: () => Promise<void> }>;
}[] = [
  {
    name: 'sqlite',
    skip: false,
    open: async () => {
      const db = openDatabase(stateDir(), silentLogger());
      return {
        q: sqliteQueries(db),
        close: async () => {
          db.close();
        },
      };
    },
  },
  {
    name: 'postgres',
    skip: postgresUnavailable(),
    open: async () => {
      const database: FreshDatabase = await freshDatabase((await sharedPostgres()).url);
      const pool = testPool(database.url, 2);
      await migratePostgres(pool, silentLogger());
      return {
        q: postgresQueries(pool),
        close: async () => {
          await pool.end();
          await database.drop();
        },
      };
    },
  },
];

for (const engine of engines) {
  describe(`API-key statements on ${engine.name}`, { skip: engine.skip }, () => {
    let q: Queries;
    let close: () => Promise<void>;
    before(async () => {
      ({ q, close } = await engine.open());
      await insertProject(q, { id: 'p.keys', name: 'keys', plan: 'pro', created_at: NOW });
    });
    after(async () => close?.());

    test('a rotation grace sets an expiry, brings a later one forward, and never pushes an earlier one back', async () => {
      await newKey(q, 'k.never', null);
      await newKey(q, 'k.later', NOW + 30 * DAY);
      await newKey(q, 'k.sooner', NOW + DAY);
      for (const id of ['k.never', 'k.later', 'k.sooner'])
        assert.equal(await shortenApiKeyExpiry(q, id, NOW + 7 * DAY), true, id);
      assert.equal((await getApiKey(q, 'k.never'))?.expires_at, NOW + 7 * DAY);
      assert.equal((await getApiKey(q, 'k.later'))?.expires_at, NOW + 7 * DAY);
      assert.equal((await getApiKey(q, 'k.sooner'))?.expires_at, NOW + DAY);
      assert.equal(await shortenApiKeyExpiry(q, 'k.missing', NOW), false);
    });

    test("a key's last use only moves later", async () => {
      await newKey(q, 'k.used', null);
      assert.equal(await apiKeyLastUsed(q, 'k.used'), null);
      await recordApiKeyUse(q, new Map([['k.used', NOW]]));
      await recordApiKeyUse(q, new Map([['k.used', NOW - 60_000]]));
      assert.equal(await apiKeyLastUsed(q, 'k.used'), NOW);
      await recordApiKeyUse(q, new Map([['k.used', NOW + 60_000]]));
      assert.equal(await apiKeyLastUsed(q, 'k.used'), NOW + 60_000);
    });
  });
}
