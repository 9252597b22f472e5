/**
 * Two Postern servers on ONE PostgreSQL database (CLUSTER.md), both delivering to one relay:
 * their schedulers lease from one queue (FOR UPDATE SKIP LOCKED, each lease owned by its node),
 * so every message is handed off exactly once, whichever node accepted it.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { systemClock } from '../../src/clock.js';
import { attachProvider } from '../../src/operator/providers.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { allValues, getValue } from '../../src/store/queries.js';
import { assertAccepted } from '../support/assertions.js';
import {
  createProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import {
  freshDatabase,
  postgresUnavailable,
  sharedPostgres,
  testPool,
} from '../support/postgres.js';
import { Sink } from '../support/relaySink.js';
import { scope, waitFor } from '../support/waiting.js';

const MESSAGES = 200;

describe('two servers on one PostgreSQL database', { skip: postgresUnavailable() }, () => {
  test(`${MESSAGES} messages accepted by either server reach one relay, each exactly once`, async (t) => {
    const s = scope(t);
    const database = s.add(await freshDatabase((await sharedPostgres()).url), (d) => d.drop());
    // A relay slow enough that both schedulers have hand-offs in flight at once.
    const sink = s.add(await Sink.start('relay', { mailDelayMs: 5 }), (x) => x.close());
    const start = async (node: string): Promise<TestPostern> =>
      s.add(
        await startTestPostern({
          config: {
            store: { backend: 'postgres', postgres: { url: database.url, pool_size: 10 } },
            node: { id: node, heartbeat_seconds: 1 },
            delivery: { enabled: true, poll_interval_ms: 20, batch_size: 20, concurrency: 20 },
          },
        }),
        (p) => p.close(),
      );
    // One after the other: the first applies the migrations.
    const a = await start('node-a');
    const b = await start('node-b');

    // The operator's own connection to the shared database (p.ctx reads each server's own test store).
    const pool = testPool(database.url, 2);
    s.add(pool, (x) => x.end());
    const ctx = {
      store: postgresQueries(pool),
      clock: systemClock,
      config: a.config,
      spoolRoot: path.join(a.stateDir, 'spool'),
    };
    const pk = await createProjectWithKeys(ctx, 'two nodes', 'pro', { provider: false });
    await attachProvider(ctx, pk.project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: String(sink.port),
      tls: 'none',
    });

    const accepted: string[] = [];
    for (let i = 0; i < MESSAGES; i += 20) {
      const ids = await Promise.all(
        Array.from({ length: 20 }, async (_, j) => {
          const n = i + j;
          // Alternately through each server's door.
          const res = await post((n % 2 === 0 ? a : b).production, '/v1/send', {
            key: pk.liveKey,
            json: validMessage({ subject: `message ${n}` }),
          });
          assertAccepted(res, 'queued');
          return res.body.id as string;
        }),
      );
      accepted.push(...ids);
    }

    await waitFor(
      async () =>
        (await getValue<number>(
          ctx.store,
          "SELECT count(*) FROM messages WHERE status = 'sent'",
        )) === MESSAGES,
      // Generous: the machine may be busy with other work.
      180_000,
      `all ${MESSAGES} messages to be sent`,
    );
    // What the relay got, by the Message-ID each message carries (<id@sender domain>).
    const received = sink.received.map(
      (r) => /^Message-ID: <([^@>]+)@/im.exec(r.raw.toString('latin1'))?.[1] ?? '?',
    );
    assert.equal(received.length, MESSAGES, 'hand-offs the relay received');
    assert.deepEqual(
      [...received].sort(),
      [...accepted].sort(),
      'each accepted message received exactly once',
    );
    assert.deepEqual(
      await allValues<number>(
        ctx.store,
        'SELECT count(*) FROM attempts GROUP BY message_id HAVING count(*) <> 1',
      ),
      [],
      'one attempt per message',
    );
    assert.equal(
      await getValue<number>(
        ctx.store,
        'SELECT count(*) FROM messages WHERE lease_owner IS NOT NULL OR lease_until IS NOT NULL',
      ),
      0,
      'no lease left behind',
    );
    // Both nodes registered (and so shared per_account_concurrency between them).
    assert.deepEqual(await allValues<string>(ctx.store, 'SELECT id FROM nodes ORDER BY id'), [
      'node-a',
      'node-b',
    ]);
  });
});
