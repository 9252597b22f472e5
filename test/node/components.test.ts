/**
 * The node's component runner (src/node/components.ts): components start in the order given and
 * stop in reverse; a start that fails stops those already started and throws its own error; a
 * reload gives each component only its section of the config.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { silentLogger } from '../../src/log.js';
import { type Component, ComponentRunner } from '../../src/node/components.js';

interface Config {
  a: { level: string };
  b: { limit: number };
  c: { name: string };
}

/** A component that writes what happens to it into `events`; `failStart`/`failStop` make that step throw. */
class Recorded<S> implements Component<S> {
  readonly reloads: S[] = [];

  constructor(
    readonly name: string,
    private readonly events: string[],
    private readonly fail: { start?: boolean; stop?: boolean } = {},
  ) {}

  async start(): Promise<void> {
    this.events.push(`start ${this.name}`);
    if (this.fail.start) throw new Error(`${this.name} did not start`);
  }

  async stop(): Promise<void> {
    this.events.push(`stop ${this.name}`);
    if (this.fail.stop) throw new Error(`${this.name} did not stop`);
  }

  reload(section: S): void {
    this.events.push(`reload ${this.name}`);
    this.reloads.push(section);
  }
}

describe('ComponentRunner', () => {
  it('starts components in the order given and stops them in reverse, once', async () => {
    const events: string[] = [];
    const runner = new ComponentRunner<Config>(silentLogger());
    for (const name of ['store', 'writer', 'doors']) await runner.start(new Recorded(name, events));
    assert.deepEqual(events, ['start store', 'start writer', 'start doors']);
    events.length = 0;
    await Promise.all([runner.stop(), runner.stop()]);
    await runner.stop();
    assert.deepEqual(events, ['stop doors', 'stop writer', 'stop store']);
  });

  it('a start that fails stops those already started, in reverse, and throws its error', async () => {
    const events: string[] = [];
    const runner = new ComponentRunner<Config>(silentLogger());
    await runner.start(new Recorded('store', events));
    await runner.start(new Recorded('writer', events));
    await assert.rejects(
      runner.start(new Recorded('doors', events, { start: true })),
      /doors did not start/,
    );
    // The failed one is not stopped: a start that throws leaves its own part cleaned up.
    assert.deepEqual(events, [
      'start store',
      'start writer',
      'start doors',
      'stop writer',
      'stop store',
    ]);
    // Stopped: nothing starts after that, and a later stop stops nothing again.
    await assert.rejects(runner.start(new Recorded('late', events)), /the node is stopping/);
    await runner.stop();
    assert.deepEqual(events.slice(5), []);
  });

  it('a component that fails to stop does not keep the others running; its error is thrown at the end', async () => {
    const events: string[] = [];
    const runner = new ComponentRunner<Config>(silentLogger());
    await runner.start(new Recorded('store', events));
    await runner.start(new Recorded('writer', events, { stop: true }));
    await runner.start(new Recorded('doors', events));
    events.length = 0;
    await assert.rejects(runner.stop(), /writer did not stop/);
    assert.deepEqual(events, ['stop doors', 'stop writer', 'stop store']);
  });

  it('a reload gives each component only its section, in start order; one started without a section is not told', async () => {
    const events: string[] = [];
    const runner = new ComponentRunner<Config>(silentLogger());
    const a = await runner.start(new Recorded<Config['a']>('a', events), (c) => c.a);
    const plain = await runner.start(new Recorded<Config['b']>('plain', events));
    const b = await runner.start(new Recorded<Config['b']>('b', events), (c) => c.b);
    events.length = 0;
    const next: Config = { a: { level: 'debug' }, b: { limit: 2 }, c: { name: 'c' } };
    runner.reload(next);
    assert.deepEqual(events, ['reload a', 'reload b']);
    assert.equal(a.reloads[0], next.a);
    assert.equal(b.reloads[0], next.b);
    assert.deepEqual(plain.reloads, []);
  });
});
