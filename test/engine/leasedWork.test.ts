/**
 * The leased-work engine (src/engine/leasedWork.ts) on a ManualClock: its timers fire only when
 * the test moves the clock, so every assertion is about order and outcome. The handler is an
 * in-memory store: items due to lease, the outcomes it recorded, each exchange's request kept,
 * runs that end when the test ends them, exchanges that can be held open or made to fail.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import type {
  ExchangeRequest,
  ExchangeResult,
  LeasedWorkHandler,
} from '../../src/engine/handler.js';
import { KeyedSlots } from '../../src/engine/keyedSlots.js';
import { LeasedWork, type LeasedWorkOptions } from '../../src/engine/leasedWork.js';
import { silentLogger } from '../../src/log.js';
import { ManualTimers, settle } from '../support/manualTimers.js';

interface Item {
  id: string;
  key: string;
}

interface Out {
  id: string;
  result: string;
  retried?: boolean;
}

class Unavailable extends Error {}

interface Seen {
  outcomes: Out[];
  lease: boolean;
  running: number;
  perKey: Map<string, number>;
  held: string[];
  reclaim: boolean;
  at: number;
}

class MemoryStore implements LeasedWorkHandler<Item, Out> {
  readonly exchanges: Seen[] = [];
  readonly recorded: Out[] = [];
  readonly started: string[] = [];
  readonly running = new Map<string, (out: Out | null) => void>();
  /** Due now: the next exchange that leases takes them (at most `leaseLimit`). */
  due: Item[] = [];
  leaseLimit = Infinity;
  /** Items the store hands out again (a lease that ran out while this node still ran them). */
  handOutAgain: Item[] = [];
  /** The next exchanges fail with these, in turn. */
  failures: Error[] = [];
  /** While set, an exchange waits for it before answering. */
  gate: Promise<void> | null = null;
  spacing = 0;

  constructor(private readonly clock: ManualClock) {}

  idOf(item: Item): string {
    return item.id;
  }

  keyOf(item: Item): string {
    return item.key;
  }

  spacingMs(): number {
    return this.spacing;
  }

  inDoubt(err: unknown): boolean {
    return err instanceof Unavailable;
  }

  afterFailure(err: unknown, out: Out): Out | null {
    return this.inDoubt(err) ? { ...out, retried: true } : null;
  }

  async exchange(request: ExchangeRequest<Out>): Promise<ExchangeResult<Item>> {
    this.exchanges.push({
      outcomes: [...request.outcomes],
      lease: request.lease,
      running: request.running,
      perKey: new Map(request.perKey),
      held: [...request.held].map(String).sort(),
      reclaim: request.reclaim,
      at: this.clock.now(),
    });
    // What is due is read as the exchange begins, as a transaction reads it.
    const leased = request.lease
      ? [...this.handOutAgain.splice(0), ...this.due.splice(0, this.leaseLimit)]
      : [];
    const more = this.due.length > 0;
    if (this.gate) await this.gate;
    const failure = this.failures.shift();
    if (failure) {
      this.due.unshift(...leased);
      throw failure;
    }
    this.recorded.push(...request.outcomes);
    return { leased, more };
  }

  run(item: Item, emit: (out: Out) => void): Promise<Out | null> {
    this.started.push(item.id);
    return new Promise((resolve) =>
      this.running.set(item.id, (out) => {
        this.running.delete(item.id);
        if (out?.result === 'emit-first') emit({ id: item.id, result: 'along the way' });
        resolve(out);
      }),
    );
  }

  /** Ends the run of `id` with `result` (null: nothing to record). */
  end(id: string, result: string | null = 'ok'): void {
    const finish = this.running.get(id);
    assert.ok(finish, `${id} is running`);
    finish(result === null ? null : { id, result });
  }
}

const T0 = Date.parse('2025-01-01T00:00:00Z');

function setUp(options: Partial<LeasedWorkOptions> = {}) {
  const clock = new ManualClock(T0);
  const timers = new ManualTimers(clock);
  const store = new MemoryStore(clock);
  const engine = new LeasedWork(store, {
    logger: silentLogger(),
    timers,
    concurrency: 3,
    perKey: 2,
    pollMs: 100,
    groupMs: 5,
    failure: { message: 'test exchange failed', maxDelayMs: 800, logPeriodMs: 60_000 },
    ...options,
  });
  return { clock, timers, store, engine };
}

const items = (key: string, ...ids: string[]): Item[] => ids.map((id) => ({ id, key }));

/** Stops the engine, ending whatever still runs. */
async function stopAll(store: MemoryStore, engine: LeasedWork<Item, Out>): Promise<void> {
  const stopped = engine.stop();
  await settle();
  for (const id of [...store.running.keys()]) store.end(id);
  await stopped;
}

/** A gate the test opens. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe('leased-work engine', () => {
  it('leases due work, runs it, records each outcome in the next exchange and lets it go once recorded', async () => {
    const { timers, store, engine } = setUp();
    store.due = items('a', 'm1', 'm2');
    engine.start();
    await timers.advance(0);
    assert.equal(store.exchanges.length, 1);
    assert.equal(store.exchanges[0].lease, true);
    assert.deepEqual(store.started, ['m1', 'm2']);
    assert.deepEqual(engine.figures(), { running: 2, held: 2, waiting: 0 });

    // An outcome with no exchange in flight goes at once (the handler's spacing is 0 here)...
    const held = gate();
    store.gate = held.promise;
    store.end('m1');
    await timers.advance(0);
    assert.equal(store.exchanges.length, 2);
    assert.deepEqual(store.exchanges[1].outcomes, [{ id: 'm1', result: 'ok' }]);
    assert.deepEqual(store.exchanges[1].held, ['m1', 'm2'], 'held until recorded');
    // ...and those that come while it is in flight wait groupMs after it returns, for company.
    store.end('m2', 'failed');
    store.gate = null;
    held.open();
    await timers.advance(4);
    assert.equal(store.exchanges.length, 2, 'not before groupMs');
    await timers.advance(1);
    assert.equal(store.exchanges.length, 3);
    assert.deepEqual(store.exchanges[2].outcomes, [{ id: 'm2', result: 'failed' }]);
    assert.deepEqual(engine.figures(), { running: 0, held: 0, waiting: 0 });

    // Idle: the next look comes after the poll interval, not before.
    await timers.advance(99);
    assert.equal(store.exchanges.length, 3);
    await timers.advance(1);
    assert.equal(store.exchanges.length, 4);
    await engine.stop();
  });

  it('runs at most perKey of one key and concurrency in all, lanes in turn; the rest wait their turn', async () => {
    const { timers, store, engine } = setUp();
    store.due = [...items('slow', 's1', 's2', 's3', 's4'), ...items('fast', 'f1', 'f2')];
    engine.start();
    await timers.advance(0);
    // 3 in all, at most 2 of `slow`: the fast lane gets its turn although slow came first.
    assert.equal(store.started.length, 3);
    assert.equal(store.started.filter((id) => id.startsWith('s')).length, 2);
    assert.ok(store.started.includes('f1'), `the fast lane started: ${store.started.join(', ')}`);
    assert.deepEqual(engine.figures(), { running: 3, held: 6, waiting: 3 });

    store.end('f1');
    await settle();
    // f1's room goes to f2 (slow is at its limit), not to a third of slow.
    assert.deepEqual(store.started.slice(3), ['f2']);
    store.end('f2');
    await settle();
    // Only slow waits now, and it is at its own limit: the free room stays free.
    assert.equal(store.started.length, 4);
    assert.equal(store.running.size, 2);
    store.end('s1');
    await settle();
    assert.deepEqual(store.started.slice(4), ['s3']);
    // The next exchange counts what each key holds here, for the lease to fill up to.
    await timers.advance(5);
    const seen = store.exchanges.at(-1)!;
    assert.deepEqual(Object.fromEntries(seen.perKey), { slow: 3 });
    assert.equal(seen.running, 2);
    await stopAll(store, engine);
  });

  it('never runs an item twice on one node: one the store hands out again while it runs is held, not started', async () => {
    const { timers, store, engine } = setUp();
    store.due = items('a', 'm1');
    engine.start();
    await timers.advance(0);
    assert.deepEqual(store.started, ['m1']);
    // Its lease ran out while it ran and the store leases it to this node again.
    store.handOutAgain = items('a', 'm1');
    engine.kick();
    await timers.advance(0);
    assert.equal(store.exchanges.length, 2);
    assert.deepEqual(store.started, ['m1'], 'not started a second time');
    assert.deepEqual(engine.figures(), { running: 1, held: 1, waiting: 0 });

    // Its outcome is not yet recorded: handed out again meanwhile, still not run.
    store.end('m1');
    store.handOutAgain = items('a', 'm1');
    store.gate = null;
    await timers.advance(5);
    // That exchange recorded its outcome before leasing: the same item leased in it is new work.
    assert.deepEqual(store.exchanges[2].outcomes, [{ id: 'm1', result: 'ok' }]);
    assert.deepEqual(
      store.started,
      ['m1', 'm1'],
      'leased again after its outcome was recorded: run again',
    );
    store.end('m1');
    await engine.stop();
  });

  it('backs off on repeated failure (kicks do not hurry it), keeps outcomes in doubt and takes back a lease in doubt', async () => {
    const { timers, store, engine } = setUp();
    store.due = items('a', 'm1', 'm2');
    engine.start();
    await timers.advance(0);
    store.end('m1');
    store.end('m2', 'refused');
    // The store goes away: in doubt twice, then it refuses, then it is back.
    store.failures = [new Unavailable('away'), new Unavailable('away'), new Unavailable('away')];
    await timers.advance(0);
    const first = store.exchanges.length - 1;
    assert.deepEqual(
      store.exchanges[first].outcomes.map((o) => o.id),
      ['m1', 'm2'],
    );
    // Retries at pollMs, then doubling: 100, 200, 400 (capped at 800) after each failure.
    engine.kick();
    await timers.advance(99);
    assert.equal(store.exchanges.length, first + 1, 'a kick does not hurry the retry');
    await timers.advance(1);
    assert.equal(store.exchanges.length, first + 2);
    const retry = store.exchanges[first + 1];
    assert.deepEqual(
      retry.outcomes,
      [
        { id: 'm1', result: 'ok', retried: true },
        { id: 'm2', result: 'refused', retried: true },
      ],
      'kept, first in line, marked as tried',
    );
    assert.equal(retry.reclaim, true, 'the lease that failed in doubt is taken back');
    assert.deepEqual(retry.held, ['m1', 'm2'], 'sparing what this node holds');
    await timers.advance(199);
    assert.equal(store.exchanges.length, first + 2);
    await timers.advance(1);
    assert.equal(store.exchanges.length, first + 3);
    await timers.advance(400);
    assert.equal(store.exchanges.length, first + 4);
    assert.deepEqual(
      store.recorded.map((o) => o.id),
      ['m1', 'm2'],
      'recorded once the store is back',
    );
    assert.equal(store.exchanges[first + 3].reclaim, true);
    assert.deepEqual(engine.figures().held, 0);
    // Recovered: the poll interval again, and no more reclaiming.
    await timers.advance(100);
    assert.equal(store.exchanges.at(-1)!.reclaim, false);

    // A refusal (not in doubt) drops the outcome and lets its item go.
    store.due = items('a', 'm3');
    engine.kick();
    await timers.advance(0);
    store.end('m3');
    store.failures = [new Error('refused')];
    await timers.advance(5);
    assert.equal(engine.figures().held, 0, 'let go: its lease runs out in the store');
    await timers.advance(100);
    assert.equal(store.exchanges.at(-1)!.outcomes.length, 0, 'not sent again');
    assert.equal(store.exchanges.at(-1)!.reclaim, false, 'nothing in doubt');
    await engine.stop();
  });

  it('caps the backoff', async () => {
    const { timers, store, engine } = setUp();
    store.failures = Array.from({ length: 6 }, () => new Error('disk full'));
    engine.start();
    await timers.advance(0);
    const at = () => store.exchanges.map((e) => e.at - T0);
    await timers.advance(100 + 200 + 400 + 800 + 800 + 800);
    assert.deepEqual(at(), [0, 100, 300, 700, 1500, 2300, 3100]);
    await engine.stop();
  });

  it('wakes at once on a kick, and a kick that comes while an exchange is in flight is not lost', async () => {
    const { timers, store, engine } = setUp();
    engine.start();
    await timers.advance(0);
    assert.equal(store.exchanges.length, 1);
    // Idle, polling every 100 ms: work due now is leased at once on a kick.
    await timers.advance(10);
    store.due = items('a', 'm1');
    engine.kick();
    await timers.advance(0);
    assert.equal(store.exchanges.length, 2);
    assert.deepEqual(store.started, ['m1']);

    // An exchange in flight (it read before m2 was due); m2 is accepted and kicks meanwhile.
    const held = gate();
    store.gate = held.promise;
    await timers.advance(100);
    assert.equal(store.exchanges.length, 3, 'the poll exchange is in flight');
    store.due = items('a', 'm2');
    engine.kick();
    store.gate = null;
    held.open();
    await settle();
    assert.deepEqual(store.started, ['m1'], 'that exchange did not see m2');
    await timers.advance(0);
    assert.equal(
      store.exchanges.length,
      4,
      'the kick made the next exchange come at once, not a poll later',
    );
    assert.deepEqual(store.started, ['m1', 'm2']);
    await stopAll(store, engine);
  });

  it('comes back at once while the store says more is due, and spaces exchanges by the handler', async () => {
    const { timers, store, engine } = setUp({ concurrency: 10, perKey: 10 });
    store.leaseLimit = 2;
    store.due = items('a', 'm1', 'm2', 'm3', 'm4', 'm5');
    store.spacing = 30;
    engine.start();
    await timers.advance(0);
    assert.deepEqual(store.started, ['m1', 'm2']);
    await timers.advance(29);
    assert.deepEqual(store.started, ['m1', 'm2'], 'spaced');
    await timers.advance(1);
    assert.deepEqual(store.started, ['m1', 'm2', 'm3', 'm4']);
    await timers.advance(30);
    assert.deepEqual(store.started, ['m1', 'm2', 'm3', 'm4', 'm5']);
    await stopAll(store, engine);
  });

  it('sends an outcome emitted along the way without letting its item go', async () => {
    const { timers, store, engine } = setUp();
    store.due = items('a', 'm1');
    engine.start();
    await timers.advance(0);
    store.end('m1', 'emit-first');
    await timers.advance(5);
    assert.deepEqual(store.exchanges[1].outcomes, [
      { id: 'm1', result: 'along the way' },
      { id: 'm1', result: 'emit-first' },
    ]);
    assert.equal(engine.figures().held, 0);
    await engine.stop();
  });

  it('stops: leases no more, lets waiting work go, lets running work finish and records its outcomes', async () => {
    const { timers, store, engine } = setUp({ concurrency: 2, perKey: 2 });
    store.due = items('a', 'm1', 'm2', 'm3', 'm4');
    engine.start();
    await timers.advance(0);
    assert.deepEqual(store.started, ['m1', 'm2']);
    assert.equal(engine.figures().waiting, 2);
    const stopped = engine.stop();
    let done = false;
    void stopped.then(() => (done = true));
    await settle();
    assert.equal(engine.figures().waiting, 0, 'waiting work let go');
    assert.deepEqual(engine.figures().held.valueOf(), 2, 'only the running work is held');
    store.end('m1');
    await timers.advance(1000);
    assert.equal(done, false, 'waits for the running work');
    assert.equal(store.exchanges.length, 1, 'no exchange while stopping but the last');
    store.due = items('a', 'm5');
    engine.kick();
    store.end('m2', 'failed');
    await stopped;
    assert.equal(store.exchanges.length, 2);
    assert.deepEqual(store.exchanges[1], {
      ...store.exchanges[1],
      lease: false,
      outcomes: [
        { id: 'm1', result: 'ok' },
        { id: 'm2', result: 'failed' },
      ],
    });
    assert.deepEqual(store.started, ['m1', 'm2'], 'm3, m4 and m5 never started');
    await timers.advance(1000);
    assert.equal(store.exchanges.length, 2, 'nothing after stop');
  });

  it('stops while an exchange is in flight: its leased work starts if there is room, and is recorded', async () => {
    const { timers, store, engine } = setUp({ concurrency: 1, perKey: 1 });
    engine.start();
    const held = gate();
    store.gate = held.promise;
    store.due = items('a', 'm1', 'm2');
    await timers.advance(0);
    const stopped = engine.stop();
    store.gate = null;
    held.open();
    await settle();
    assert.deepEqual(store.started, ['m1'], 'the room there was; m2 let go');
    assert.equal(engine.figures().held, 1);
    store.end('m1');
    await stopped;
    assert.deepEqual(store.exchanges.at(-1)!.outcomes, [{ id: 'm1', result: 'ok' }]);
    assert.equal(store.exchanges.at(-1)!.lease, false);
  });
});

describe('keyed slots', () => {
  it('lets at most the limit per key through, the rest in turn, and a raised limit lets waiters go at once', async () => {
    const slots = new KeyedSlots(1);
    const order: string[] = [];
    const take = (key: string, name: string) => slots.acquire(key).then(() => order.push(name));
    void take('x', 'x1');
    void take('x', 'x2');
    void take('x', 'x3');
    void take('y', 'y1');
    await settle();
    assert.deepEqual(order, ['x1', 'y1']);
    slots.release('x');
    await settle();
    assert.deepEqual(order, ['x1', 'y1', 'x2']);
    slots.setLimit(3);
    await settle();
    assert.deepEqual(order, ['x1', 'y1', 'x2', 'x3']);
  });
});
