import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type pg from 'pg';
import { ManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/log.js';
import { SlidingWindowLimiter } from '../../src/policy/rateLimiter.js';
import { type RateSlot, type RateWindow, RELEASED_AT } from '../../src/policy/rateWindow.js';
import { SharedSlidingWindowLimiter } from '../../src/policy/sharedRateLimiter.js';
import { openDatabase } from '../../src/store/db.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresMigrations } from '../../src/store/postgres/migrations.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { type Queries, sqliteQueries } from '../../src/store/queries.js';
import {
  pruneRateWindows,
  rateWindowWait,
  recordRateWindow,
  releaseRateWindow,
  takeRateWindow,
} from '../../src/store/rateWindows.js';
import { tempDirs } from '../support/hooks.js';
import {
  freshDatabase,
  postgresUnavailable,
  startPrivatePostgres,
  type TestPostgres,
  testPool,
} from '../support/postgres.js';
import { runReleases } from '../support/rateWindowRelease.js';

/**
 * Rate windows counted by several nodes on one PostgreSQL (store/rateWindows.ts,
 * policy/sharedRateLimiter.ts): three pools on one database stand for three nodes, each with
 * its own limiter objects, as three processes would have; one ManualClock stands for their
 * (agreeing) clocks. Each test has a database of its own.
 */

const T0 = Date.UTC(2026, 10, 26, 12, 0, 0);
const MINUTE = 60_000;

const stateDir = tempDirs('postern-pg-rate-windows-');

/** A node: its pool and the Queries over it. */
interface Node {
  pool: pg.Pool;
  q: Queries;
}

/** Prune failures fail the test that caused them. */
function failOnPrune(errors: Error[]): (err: Error) => void {
  return (err) => void errors.push(err);
}

/** The answer of a RateWindow call, in memory or shared. */
const answer = async <T>(value: T | Promise<T>): Promise<T> => value;

describe('rate windows shared by nodes on PostgreSQL', { skip: postgresUnavailable() }, () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPrivatePostgres();
  });
  after(async () => server?.stop());

  /** A fresh migrated database and three warm pools on it ("nodes"), for one test. */
  async function withNodes(
    run: (nodes: Node[], pruneErrors: Error[]) => Promise<void>,
  ): Promise<void> {
    const database = await freshDatabase(server.url);
    const pools = [0, 1, 2].map(() => testPool(database.url, 8));
    const pruneErrors: Error[] = [];
    try {
      await migratePostgres(pools[0], silentLogger());
      // Connected before the test: one node's first take must not trail the others by a login.
      await Promise.all(pools.flatMap((p) => Array.from({ length: 8 }, () => p.query('SELECT 1'))));
      await run(
        pools.map((pool) => ({ pool, q: postgresQueries(pool) })),
        pruneErrors,
      );
      assert.deepEqual(pruneErrors, [], 'no background prune failed');
    } finally {
      await Promise.all(pools.map((p) => p.end()));
      await database.drop();
    }
  }

  /** One limiter per node, of one name and configuration, on one clock. */
  function limiterOnEachNode(
    nodes: Node[],
    name: string,
    limit: number,
    windowMs: number,
    clock: ManualClock,
    pruneErrors: Error[],
  ): SharedSlidingWindowLimiter[] {
    return nodes.map(
      (n) =>
        new SharedSlidingWindowLimiter(n.q, name, limit, windowMs, clock, failOnPrune(pruneErrors)),
    );
  }

  async function settled(limiters: SharedSlidingWindowLimiter[]): Promise<void> {
    await Promise.all(limiters.map((l) => l.settled()));
  }

  async function count(node: Node, table: 'rate_windows' | 'rate_window_slots'): Promise<number> {
    return (await node.q.get<{ n: number }>(`SELECT count(*) AS n FROM ${table}`))!.n;
  }

  /** `n` takes of `key` at once, spread over the nodes in turn; their waits, in the order started. */
  function takeAtOnce(limiters: RateWindow[], key: string, n: number): Promise<number[]> {
    return Promise.all(
      Array.from({ length: n }, (_, i) => answer(limiters[i % limiters.length].take(key))),
    );
  }

  const admitted = (waits: number[]) => waits.filter((w) => w === 0).length;

  test('three nodes taking one key 60 times at once with room for 10 admit exactly 10, for each of five new keys taken together', async () => {
    await withNodes(async (nodes, pruneErrors) => {
      const clock = new ManualClock(T0);
      const limiters = limiterOnEachNode(nodes, 'send', 10, MINUTE, clock, pruneErrors);
      const keys = ['k.1', 'k.2', 'k.3', 'k.4', 'k.5'];
      // 300 takes in flight together: each key's first takes race to create its window too.
      const waits = await Promise.all(keys.map((key) => takeAtOnce(limiters, key, 60)));
      for (const [i, key] of keys.entries()) {
        assert.equal(admitted(waits[i]), 10, `${key}: admitted`);
        // All ten events at T0: each refusal is told to wait the whole window.
        assert.deepEqual(
          waits[i].filter((w) => w > 0),
          Array(50).fill(MINUTE),
          `${key}: refusals' waits`,
        );
      }
      for (const limiter of limiters) assert.equal(await limiter.waitMs('k.1'), MINUTE);
      assert.equal(await count(nodes[0], 'rate_windows'), 5);
      assert.equal(await count(nodes[0], 'rate_window_slots'), 50);
      await settled(limiters);
    });
  });

  test('a refused take is told oldest + window − now; once the clock has moved that much, exactly one more of 60 concurrent takes is admitted', async () => {
    await withNodes(async (nodes, pruneErrors) => {
      const clock = new ManualClock(T0);
      const limiters = limiterOnEachNode(nodes, 'send', 10, MINUTE, clock, pruneErrors);
      // Ten events a second apart, each on the next node.
      for (let i = 0; i < 10; i++) {
        clock.set(T0 + i * 1000);
        assert.equal(await limiters[i % 3].take('key'), 0, `event ${i}`);
      }
      clock.set(T0 + 9500);
      const wait = await limiters[1].take('key');
      assert.equal(
        wait,
        T0 + MINUTE - (T0 + 9500),
        'the oldest event (T0) leaves the window at T0 + 60 s',
      );

      clock.advance(wait - 1);
      const early = await takeAtOnce(limiters, 'key', 60);
      assert.deepEqual(early, Array(60).fill(1), 'a millisecond before, every take waits 1 ms');

      clock.advance(1);
      const due = await takeAtOnce(limiters, 'key', 60);
      assert.equal(admitted(due), 1, 'exactly one admitted when the oldest event has left');
      // The next oldest (T0 + 1 s) leaves a second later.
      assert.deepEqual(
        due.filter((w) => w > 0),
        Array(59).fill(1000),
      );

      clock.advance(1000);
      assert.equal(
        admitted(await takeAtOnce(limiters, 'key', 60)),
        1,
        'and one more a second later',
      );
      await settled(limiters);
    });
  });

  test('windows of different keys, limiters and configurations count apart', async () => {
    await withNodes(async ([a, b, c], pruneErrors) => {
      const clock = new ManualClock(T0);
      const errors = failOnPrune(pruneErrors);
      const sendOnA = new SharedSlidingWindowLimiter(a.q, 'send', 2, MINUTE, clock, errors);
      const sendOnB = new SharedSlidingWindowLimiter(b.q, 'send', 2, MINUTE, clock, errors);
      const batchOnC = new SharedSlidingWindowLimiter(c.q, 'batch', 2, MINUTE, clock, errors);
      // The same limiter reloaded with another limit on one node: a window of its own, as a
      // reload starts afresh in memory.
      const sendReloaded = new SharedSlidingWindowLimiter(c.q, 'send', 3, MINUTE, clock, errors);
      const sendOtherWindow = new SharedSlidingWindowLimiter(
        c.q,
        'send',
        2,
        2 * MINUTE,
        clock,
        errors,
      );

      assert.deepEqual(
        [await sendOnA.take('k.1'), await sendOnB.take('k.1'), await sendOnA.take('k.1')],
        [0, 0, MINUTE],
      );
      assert.deepEqual(
        [await sendOnB.take('k.2'), await sendOnA.take('k.2'), await sendOnB.take('k.2')],
        [0, 0, MINUTE],
        'another key',
      );
      assert.deepEqual(
        [await batchOnC.take('k.1'), await batchOnC.take('k.1'), await batchOnC.take('k.1')],
        [0, 0, MINUTE],
        'another limiter, same key',
      );
      assert.deepEqual(
        [
          await sendReloaded.take('k.1'),
          await sendReloaded.take('k.1'),
          await sendReloaded.take('k.1'),
          await sendReloaded.take('k.1'),
        ],
        [0, 0, 0, MINUTE],
        'the same limiter with another limit',
      );
      assert.deepEqual(
        [
          await sendOtherWindow.take('k.1'),
          await sendOtherWindow.take('k.1'),
          await sendOtherWindow.take('k.1'),
        ],
        [0, 0, 2 * MINUTE],
        'with another window',
      );
      // None of them moved the first.
      assert.equal(await sendOnB.waitMs('k.1'), MINUTE);
      assert.equal(await sendOnB.waitMs('k.3'), 0, 'a key never taken');
      await settled([sendOnA, sendOnB, batchOnC, sendReloaded, sendOtherWindow]);
    });
  });

  test('pruning keeps the table to the windows still holding events: 20 windows of 50 new keys each leave 50 rows, then one', async () => {
    await withNodes(async (nodes, pruneErrors) => {
      const clock = new ManualClock(T0);
      const windowMs = 10_000;
      const limiters = limiterOnEachNode(nodes, 'viewer', 3, windowMs, clock, pruneErrors);
      // Another limiter's windows: pruned by its own limiters, not these.
      const other = new SharedSlidingWindowLimiter(
        nodes[0].q,
        'other',
        3,
        100 * windowMs,
        clock,
        failOnPrune(pruneErrors),
      );
      assert.equal(await other.take('ip.kept'), 0);
      await other.settled();
      for (let round = 0; round < 20; round++) {
        // The previous round's events leave the window now: its windows are pruned by the
        // first take of the round on each node, in the background.
        clock.set(T0 + round * windowMs);
        const keys = Array.from({ length: 50 }, (_, i) => `ip.${round}.${i}`);
        const waits = await Promise.all(keys.map((key) => takeAtOnce(limiters, key, 4)));
        assert.equal(
          waits.flat().filter((w) => w === 0).length,
          150,
          `round ${round}: three per key admitted`,
        );
        await settled(limiters);
        assert.equal(
          await count(nodes[0], 'rate_windows'),
          50 + 1,
          `round ${round}: this round's windows and the other limiter's`,
        );
        assert.equal(
          await count(nodes[0], 'rate_window_slots'),
          150 + 1,
          `round ${round}: their slots`,
        );
      }
      // A quiet window later, one take: only its window is left (and the other limiter's).
      clock.advance(3 * windowMs);
      assert.equal(await limiters[2].take('ip.last'), 0);
      await settled(limiters);
      assert.deepEqual(
        await nodes[0].q.all<{ limiter: string; key: string; filled: number }>(
          'SELECT limiter, key, filled FROM rate_windows ORDER BY key',
        ),
        [
          { limiter: 'other', key: 'ip.kept', filled: 1 },
          { limiter: 'viewer', key: 'ip.last', filled: 1 },
        ],
      );
      assert.equal(await count(nodes[0], 'rate_window_slots'), 2);
      // A key pruned starts afresh: all its events had left the window anyway.
      assert.equal(await limiters[0].waitMs('ip.19.0'), 0);
      assert.equal(await limiters[0].prune(), 0, 'nothing left to prune');
      clock.advance(windowMs);
      assert.equal(await limiters[0].prune(), 1, 'ip.last, once its event has left');
    });
  });

  test('a prune racing takes of the same expired window loses no event: every take is admitted or refused as if the window had been deleted first', async () => {
    await withNodes(async (nodes, pruneErrors) => {
      const clock = new ManualClock(T0);
      const limiters = limiterOnEachNode(nodes, 'unauthenticated', 5, MINUTE, clock, pruneErrors);
      for (let round = 0; round < 10; round++) {
        assert.equal(admitted(await takeAtOnce(limiters, 'ip', 5)), 5);
        // Every event leaves the window; prunes on every node race 30 takes.
        clock.advance(MINUTE);
        const [waits] = await Promise.all([
          takeAtOnce(limiters, 'ip', 30),
          ...nodes.map((n) => pruneRateWindows(n.q, 'unauthenticated', clock.now())),
        ]);
        assert.equal(admitted(waits), 5, `round ${round}`);
        clock.advance(MINUTE);
      }
      await settled(limiters);
    });
  });

  /** The slot of an admitted reservation (fails the test on a refusal). */
  function admittedSlot(r: { waitMs: number; slot: RateSlot | null }): RateSlot {
    assert.equal(r.waitMs, 0, 'admitted');
    assert.ok(r.slot !== null);
    return r.slot;
  }

  test("a reserve on one node names its event; a release through another gives it back (the oldest slot then holds a time before any clock) and a third node's reserve takes the place at once; a second release of it, or one for another key, does nothing", async () => {
    await withNodes(async (nodes, pruneErrors) => {
      const clock = new ManualClock(T0);
      const [a, b, c] = limiterOnEachNode(
        nodes,
        'console_sign_in_account',
        2,
        MINUTE,
        clock,
        pruneErrors,
      );
      const first = admittedSlot(await a.reserve('k'));
      clock.advance(1000);
      const second = admittedSlot(await b.reserve('k'));
      assert.deepEqual([second.window, first.write, second.write], [first.window, 0, 1]);
      assert.deepEqual(
        await c.reserve('k'),
        { waitMs: MINUTE - 1000, slot: null, policyGeneration: 0 },
        'the policy generation (no policy row changed) read with the take',
      );

      assert.equal(await b.release('other key', first), false, 'another key');
      assert.equal(await b.release('k', first), true);
      assert.deepEqual(
        await nodes[0].q.all('SELECT slot, at FROM rate_window_slots ORDER BY slot'),
        [
          { slot: 0, at: RELEASED_AT },
          { slot: 1, at: T0 + 1000 },
        ],
      );
      assert.deepEqual(
        await c.reserve('k'),
        { waitMs: 0, slot: { window: first.window, write: 2 }, policyGeneration: 0 },
        'the place given back, at once',
      );
      assert.equal(await a.release('k', first), false, 'given back already');
      assert.equal(await a.waitMs('k'), MINUTE, 'both kept events at T0 + 1 s');
      await settled([a, b, c]);
    });
  });

  test('a slot of a window pruned since is not given back in the window its key started afresh', async () => {
    await withNodes(async (nodes, pruneErrors) => {
      const clock = new ManualClock(T0);
      const [a, b] = limiterOnEachNode(nodes, 'viewer_ip', 1, MINUTE, clock, pruneErrors);
      const old = admittedSlot(await a.reserve('k'));
      await settled([a]);
      clock.advance(2 * MINUTE);
      assert.equal(await b.prune(), 1);
      const fresh = admittedSlot(await b.reserve('k'));
      assert.notEqual(fresh.window, old.window);
      assert.equal(fresh.write, 0);
      assert.equal(await a.release('k', old), false);
      assert.equal(await a.waitMs('k'), MINUTE);
      await settled([a, b]);
    });
  });

  test('three nodes: 60 reserves at once with room for 10; then the 5 oldest given back while 60 more reserve at once: never more than 10 kept, and exactly 5 more admitted once the releases are in', async () => {
    await withNodes(async (nodes, pruneErrors) => {
      const clock = new ManualClock(T0);
      const limiters = limiterOnEachNode(
        nodes,
        'console_sign_in_ip',
        10,
        MINUTE,
        clock,
        pruneErrors,
      );
      const first = await Promise.all(
        Array.from({ length: 60 }, (_, i) => limiters[i % 3].reserve('ip')),
      );
      const slots = first
        .flatMap((r) => (r.slot === null ? [] : [r.slot]))
        .sort((x, y) => x.write - y.write);
      assert.deepEqual(
        slots.map((s) => s.write),
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      );
      const [released, during] = await Promise.all([
        Promise.all(slots.slice(0, 5).map((slot, i) => limiters[(i + 1) % 3].release('ip', slot))),
        takeAtOnce(limiters, 'ip', 60),
      ]);
      assert.deepEqual(released, [true, true, true, true, true]);
      assert.ok(admitted(during) <= 5, `${admitted(during)} admitted while 5 were given back`);
      const later = await takeAtOnce(limiters, 'ip', 60);
      assert.equal(admitted(during) + admitted(later), 5);
      assert.deepEqual(
        await nodes[0].q.all('SELECT at, count(*) AS n FROM rate_window_slots GROUP BY at'),
        [{ at: T0, n: 10 }],
        'ten events kept, none given back left',
      );
      await settled(limiters);
    });
  });

  for (const [limit, seed] of [
    [1, 11],
    [3, 12],
    [5, 13],
  ]) {
    test(`release never admits more than the limit in any window, calls spread over three nodes (limit ${limit}, 400 random steps, seed ${seed})`, async () => {
      await withNodes(async (nodes, pruneErrors) => {
        const clock = new ManualClock(T0);
        const limiters = limiterOnEachNode(
          nodes,
          'console_sign_in_account',
          limit,
          1000,
          clock,
          pruneErrors,
        );
        const run = await runReleases(limiters, clock, seed, 400);
        assert.ok(run.admitted > 20 && run.refused > 20 && run.released > 20, JSON.stringify(run));
        await settled(limiters);
      });
    });
  }

  test('windows filled before migration 14 (by rate_window_take, which a node of the previous release still calls during a rolling change) number their events from then on, and give them back in ring order', async () => {
    const database = await freshDatabase(server.url);
    const pool = testPool(database.url, 4);
    try {
      await migratePostgres(
        pool,
        silentLogger(),
        postgresMigrations.filter((m) => m.version < 14),
      );
      const q = postgresQueries(pool);
      const oldTake = async (limiter: string, max: number, now: number, always = false) =>
        (await q.get<{ wait_ms: number }>(
          'SELECT rate_window_take(@limiter, @max, @windowMs, @key, @now, @always) AS wait_ms',
          { limiter, max, windowMs: MINUTE, key: 'k', now, always },
        ))!.wait_ms;
      // One window not yet full (two of three), one come round its ring (five failures recorded in two places).
      for (let i = 0; i < 2; i++) assert.equal(await oldTake('part', 3, T0 + i), 0);
      for (let i = 0; i < 5; i++) assert.equal(await oldTake('round', 2, T0 + i, true), 0);
      await migratePostgres(pool, silentLogger());
      // A limiter each: neither's background prune deletes the other's window.
      const clock = new ManualClock(T0);
      const errors: Error[] = [];
      const part = new SharedSlidingWindowLimiter(q, 'part', 3, MINUTE, clock, failOnPrune(errors));
      const round = new SharedSlidingWindowLimiter(
        q,
        'round',
        2,
        MINUTE,
        clock,
        failOnPrune(errors),
      );
      clock.set(T0 + 10);
      const third = admittedSlot(await part.reserve('k'));
      assert.equal(third.write, 0, 'numbered from 0: the events before have no number');
      // The oldest of round's two (T0 + 3, in slot 1) has left.
      clock.set(T0 + MINUTE + 3);
      const sixth = admittedSlot(await round.reserve('k'));
      assert.equal(sixth.write, 0);
      // Given back, the event before it (unnumbered) moves up and the oldest slot is left free.
      assert.equal(await round.release('k', sixth), true);
      const slotsOf = (window: number) =>
        q.all(
          'SELECT slot, at, write_id FROM rate_window_slots WHERE window_id = @window ORDER BY slot',
          { window },
        );
      assert.deepEqual(await slotsOf(sixth.window), [
        { slot: 0, at: RELEASED_AT, write_id: null },
        { slot: 1, at: T0 + 4, write_id: null },
      ]);
      // The previous release's function numbers its events too.
      assert.equal(await part.release('k', third), true);
      assert.deepEqual(
        [
          await oldTake('part', 3, T0 + MINUTE),
          await oldTake('part', 3, T0 + MINUTE + 1),
          await oldTake('part', 3, T0 + MINUTE + 1),
        ],
        [0, 0, 0],
      );
      assert.deepEqual(await slotsOf(third.window), [
        { slot: 0, at: T0 + MINUTE, write_id: 1 },
        { slot: 1, at: T0 + MINUTE + 1, write_id: 2 },
        { slot: 2, at: T0 + MINUTE + 1, write_id: 3 },
      ]);
      assert.equal(await part.release('k', third), false, 'given back already');
      clock.set(T0 + MINUTE + 1);
      assert.equal(await part.waitMs('k'), MINUTE - 1);
      await Promise.all([part.settled(), round.settled()]);
      assert.deepEqual(errors, []);
    } finally {
      await pool.end();
      await database.drop();
    }
  });

  /**
   * Sequences of events (milliseconds after T0, an operation, a key) run through the in-memory
   * limiter and the shared one (its calls spread over the three nodes): the same answers.
   * `expect`, where given, pins the answers themselves.
   */
  interface Step {
    at: number;
    op: 'take' | 'wait' | 'record' | 'reserve' | 'release';
    key: string;
    /** For a release: the step whose reserve it gives back. */
    of?: number;
  }
  interface Scenario {
    what: string;
    limit: number;
    windowMs: number;
    steps: Step[];
    expect?: (number | null)[];
  }
  const take = (at: number, key = 'a'): Step => ({ at, op: 'take', key });
  const wait = (at: number, key = 'a'): Step => ({ at, op: 'wait', key });
  const record = (at: number, key = 'a'): Step => ({ at, op: 'record', key });
  const reserve = (at: number, key = 'a'): Step => ({ at, op: 'reserve', key });
  const release = (at: number, of: number, key = 'a'): Step => ({ at, op: 'release', key, of });

  const scenarios: Scenario[] = [
    {
      what: 'a burst up to the limit, then refusals whose wait shrinks as the clock moves',
      limit: 3,
      windowMs: 1000,
      steps: [
        take(0),
        take(10),
        take(20),
        take(30),
        take(500),
        wait(999),
        take(1000),
        take(1005),
        take(1010),
        take(1020),
      ],
      expect: [0, 0, 0, 970, 500, 1, 0, 5, 0, 0],
    },
    {
      what: 'the boundary: an event exactly a window old has left it',
      limit: 1,
      windowMs: 100,
      steps: [take(0), take(99), take(100), take(199), take(200), wait(200), wait(300)],
      expect: [0, 1, 0, 1, 0, 100, 0],
    },
    {
      what: 'two keys interleaved, each with its own window',
      limit: 2,
      windowMs: 1000,
      steps: [
        take(0, 'a'),
        take(1, 'b'),
        take(2, 'a'),
        take(3, 'b'),
        take(4, 'a'),
        take(5, 'b'),
        take(1000, 'a'),
        take(1000, 'b'),
        take(1001, 'b'),
        take(1002, 'a'),
      ],
      expect: [0, 0, 0, 0, 996, 996, 0, 1, 0, 0],
    },
    {
      what: 'failures recorded past the limit (sign-ins): the wait is for the limit-th newest event',
      limit: 3,
      windowMs: 1000,
      steps: [
        record(0),
        record(100),
        record(200),
        record(300),
        record(400),
        wait(450),
        wait(1199),
        wait(1200),
        take(1200),
        wait(1200),
        take(1300),
        take(1301),
      ],
      expect: [null, null, null, null, null, 750, 1, 0, 0, 100, 0, 99],
    },
    {
      what: 'a key idle for longer than a window starts afresh (the in-memory sweep, the shared prune)',
      limit: 2,
      windowMs: 500,
      steps: [
        take(0),
        take(1),
        take(2),
        take(5000, 'other'),
        take(5001),
        take(5002),
        take(5003),
        wait(5500),
        take(5501),
      ],
      expect: [0, 0, 498, 0, 0, 0, 498, 1, 0],
    },
    {
      what: 'a steady stream faster than the limit allows, over several windows',
      limit: 4,
      windowMs: 1000,
      steps: Array.from({ length: 40 }, (_, i) => take(i * 110)),
    },
    {
      what: 'events given back (1) free their places at once, from the middle of the ring too',
      limit: 3,
      windowMs: 1000,
      steps: [
        reserve(0),
        reserve(100),
        reserve(200),
        release(300, 1),
        take(300),
        release(300, 0),
        take(300),
        take(300),
        take(300),
        wait(300),
      ],
      expect: [0, 0, 0, 1, 0, 1, 0, 900, 900, 900],
    },
    {
      what: 'an event whose place a later take has taken over is not given back (0); the newest given back frees a place at once',
      limit: 2,
      windowMs: 1000,
      steps: [
        reserve(0),
        reserve(10),
        reserve(20),
        take(1000),
        release(1000, 0),
        take(1000),
        wait(1010),
        reserve(1010),
        release(1010, 7),
        take(1010),
      ],
      expect: [0, 0, 980, 0, 0, 10, 0, 0, 1, 0],
    },
    {
      what: 'several takes in one millisecond',
      limit: 3,
      windowMs: 1000,
      steps: [
        take(7),
        take(7),
        take(7),
        take(7),
        wait(7),
        take(1006),
        take(1007),
        take(1007),
        take(1007),
        take(1007),
      ],
      expect: [0, 0, 0, 1000, 1000, 1, 0, 0, 0, 1000],
    },
  ];

  test('the in-memory and the shared limiter give the same answers to the same sequences of events', async () => {
    await withNodes(async (nodes, pruneErrors) => {
      for (const [n, scenario] of scenarios.entries()) {
        const memoryClock = new ManualClock(T0);
        const sharedClock = new ManualClock(T0);
        const inMemory: RateWindow = new SlidingWindowLimiter(
          scenario.limit,
          scenario.windowMs,
          memoryClock,
        );
        // A limiter name per scenario: each starts from an empty table.
        const shared = limiterOnEachNode(
          nodes,
          `scenario-${n}`,
          scenario.limit,
          scenario.windowMs,
          sharedClock,
          pruneErrors,
        );
        const run = async (clock: ManualClock, limiterFor: (i: number) => RateWindow) => {
          const answers: (number | null)[] = [];
          const slots = new Map<number, RateSlot>();
          for (const [i, step] of scenario.steps.entries()) {
            clock.set(T0 + step.at);
            const limiter = limiterFor(i);
            if (step.op === 'take') answers.push(await answer(limiter.take(step.key)));
            else if (step.op === 'wait') answers.push(await answer(limiter.waitMs(step.key)));
            else if (step.op === 'record')
              answers.push((await answer(limiter.record(step.key))) ?? null);
            else if (step.op === 'reserve') {
              const reserved = await answer(limiter.reserve(step.key));
              if (reserved.slot !== null) slots.set(i, reserved.slot);
              answers.push(reserved.waitMs);
            } else {
              const slot = slots.get(step.of!);
              answers.push(
                slot === undefined ? null : Number(await answer(limiter.release(step.key, slot))),
              );
            }
          }
          return answers;
        };
        const fromMemory = await run(memoryClock, () => inMemory);
        const fromShared = await run(sharedClock, (i) => shared[i % shared.length]);
        await settled(shared);
        assert.deepEqual(fromShared, fromMemory, `${scenario.what}: shared against in-memory`);
        if (scenario.expect)
          assert.deepEqual(fromMemory, scenario.expect, `${scenario.what}: the answers`);
      }
    });
  });
});

describe('rate windows on the SQLite store', () => {
  test('are refused: one node counts in memory', async () => {
    const db = openDatabase(stateDir(), silentLogger());
    try {
      const q = sqliteQueries(db);
      const limit = { limiter: 'send', maxEvents: 1, windowMs: 1000 };
      assert.throws(
        () =>
          new SharedSlidingWindowLimiter(q, 'send', 1, 1000, new ManualClock(T0), () => undefined),
        /PostgreSQL/,
      );
      await assert.rejects(takeRateWindow(q, limit, 'k', T0), /PostgreSQL/);
      await assert.rejects(recordRateWindow(q, limit, 'k', T0), /PostgreSQL/);
      await assert.rejects(rateWindowWait(q, limit, 'k', T0), /PostgreSQL/);
      await assert.rejects(releaseRateWindow(q, limit, 'k', { window: 1, write: 0 }), /PostgreSQL/);
      await assert.rejects(pruneRateWindows(q, 'send', T0), /PostgreSQL/);
    } finally {
      db.close();
    }
  });
});
