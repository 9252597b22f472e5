/**
 * The console's live-update streams under an attacker's probes (issue 32, items 1, 2 and 12):
 * a stream ends with the session or token that opened it (sign-out, revocation, the operator's
 * removal, a password change or reset, idle expiry, and on PostgreSQL a sign-out on another
 * node), stops delivering projects its operator lost, gets a bulk action's refresh only for the
 * messages it may see, and a stream that does not read is held to a small queue. A real server,
 * streams read over raw sockets (test/support/rawEventStream.ts); a stream that does not read
 * is a socket never read from after the response head.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { removeOperator, updateOperator } from '../../src/operator/operators.js';
import { insertMessage, type NewMessageRow } from '../../src/store/messages.js';
import {
  ConsoleClient,
  consoleWorld,
  expectStatus,
  operatorAccount,
  PASSWORD,
} from '../support/console.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  startTestNodes,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';
import { watchPeakRss } from '../support/processMemory.js';
import { parseExposition } from '../support/prometheusText.js';
import { RawEventStream, type StreamEvent } from '../support/rawEventStream.js';
import { waitFor } from '../support/waiting.js';

const MiB = 1024 * 1024;
/** A check interval no test waits for: what ends a stream in these suites is the server's own hook. */
const NEVER_MS = 3_600_000;

async function send(
  base: string,
  key: string,
  overrides: Record<string, unknown> = {},
): Promise<string> {
  const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
  assert.equal(res.status, 202, res.text);
  return (res.body as { id: string }).id;
}

const about = (id: string) => (e: StreamEvent) => e.event === 'message' && e.data.id === id;

async function openStream(
  base: string,
  auth: { cookie?: string | null; token?: string | null },
  query = '',
): Promise<RawEventStream> {
  const stream = await RawEventStream.open(base, { ...auth, query });
  assert.equal(stream.status, 200, JSON.stringify(stream.body));
  return stream;
}

/** One scrape of the console's /metrics. */
async function metrics(consoleUrl: string): Promise<Map<string, number>> {
  const res = await fetch(`${consoleUrl}/metrics`);
  assert.equal(res.status, 200);
  return parseExposition(await res.text());
}

describe('console live streams end with the authority that opened them (on this node)', () => {
  let p: TestPostern;
  let a: ProjectWithKeys;
  let b: ProjectWithKeys;
  let owner: ConsoleClient;
  /** The owner's stream: proof that a message was announced at all. */
  let witness: RawEventStream;

  before(async () => {
    // Nothing here waits for the periodic check: the server's sign-out, revoke and remove must end the streams themselves.
    ({ p, a, b, owner } = await consoleWorld({
      config: { console: { events_poll_ms: 50, stream_check_ms: NEVER_MS } },
    }));
    witness = await openStream(p.console, { cookie: owner.cookie });
  });
  after(async () => {
    witness?.close();
    await p?.close();
  });

  /** Sends a message to project `pk`'s sandbox and waits until the owner's stream has it (it was announced). */
  async function announced(pk: ProjectWithKeys): Promise<string> {
    const id = await send(p.sandbox, pk.testKey);
    await witness.next(about(id));
    return id;
  }

  test('signing out ends the session’s stream: what is accepted after it never reaches the stream, and the cookie opens no new one', async () => {
    await operatorAccount(p.ctx, 'signout@example.com', 'member', [a.project.id]);
    const member = await ConsoleClient.signIn(p.console, 'signout@example.com', PASSWORD);
    const cookie = member.cookie;
    const stream = await openStream(p.console, { cookie });
    const first = await announced(a);
    await stream.next(about(first));
    expectStatus(await member.delete('/session'), 204);
    await stream.closedByServer();
    const later = await announced(a);
    assert.ok(!stream.events.some(about(later)), JSON.stringify(stream.events));
    assert.equal((await RawEventStream.open(p.console, { cookie })).status, 401);
  });

  test('revoking a token ends the streams it opened; another token of the same operator keeps its own', async () => {
    await operatorAccount(p.ctx, 'tokens@example.com', 'member', [a.project.id]);
    const member = await ConsoleClient.signIn(p.console, 'tokens@example.com', PASSWORD);
    const revoked = expectStatus(await member.post('/tokens', { name: 'revoked' }), 201);
    const kept = expectStatus(await member.post('/tokens', { name: 'kept' }), 201);
    const doomed = await openStream(p.console, { token: revoked.token });
    const alive = await openStream(p.console, { token: kept.token });
    expectStatus(await member.delete(`/tokens/${revoked.id}`), 200);
    await doomed.closedByServer();
    const later = await announced(a);
    await alive.next(about(later));
    assert.ok(!doomed.events.some(about(later)), JSON.stringify(doomed.events));
    alive.close();
  });

  test('removing an operator ends every stream of theirs, by session and by token', async () => {
    const gone = await operatorAccount(p.ctx, 'removed@example.com', 'member', [a.project.id]);
    const member = await ConsoleClient.signIn(p.console, gone.email, PASSWORD);
    const token = expectStatus(await member.post('/tokens', { name: 'script' }), 201)
      .token as string;
    const bySession = await openStream(p.console, { cookie: member.cookie });
    const byToken = await openStream(p.console, { token });
    expectStatus(await owner.delete(`/operators/${gone.id}`), 200);
    await bySession.closedByServer();
    await byToken.closedByServer();
    const later = await announced(a);
    assert.ok(![...bySession.events, ...byToken.events].some(about(later)));
  });

  test('a member moved off a project: their stream of it ends, and their other stream no longer carries it', async () => {
    const moved = await operatorAccount(p.ctx, 'moved@example.com', 'member', [a.project.id]);
    const member = await ConsoleClient.signIn(p.console, moved.email, PASSWORD);
    const everything = await openStream(p.console, { cookie: member.cookie });
    const projectA = await openStream(
      p.console,
      { cookie: member.cookie },
      `?project=${a.project.id}`,
    );
    const before = await announced(a);
    await everything.next(about(before));
    expectStatus(await owner.patch(`/operators/${moved.id}`, { projects: [b.project.id] }), 200);
    await projectA.closedByServer();
    const lost = await announced(a);
    const gained = await announced(b);
    await everything.next(about(gained));
    assert.ok(!everything.events.some(about(lost)), JSON.stringify(everything.events));
    everything.close();
  });

  test('a password change ends the operator’s other sessions’ streams (not its own); a reset by an owner ends them all', async () => {
    const op = await operatorAccount(p.ctx, 'password@example.com', 'member', [a.project.id]);
    const here = await ConsoleClient.signIn(p.console, op.email, PASSWORD);
    const elsewhere = await ConsoleClient.signIn(p.console, op.email, PASSWORD);
    const hereStream = await openStream(p.console, { cookie: here.cookie });
    const elsewhereStream = await openStream(p.console, { cookie: elsewhere.cookie });
    const next = 'a brand new passphrase for the stream test 7';
    expectStatus(
      await here.put('/session/password', { current_password: PASSWORD, new_password: next }),
      200,
    );
    await elsewhereStream.closedByServer();
    const later = await announced(a);
    await hereStream.next(about(later));
    expectStatus(await owner.post(`/operators/${op.id}/reset-password`), 200);
    await hereStream.closedByServer();
  });
});

describe('console live streams are checked again every console.stream_check_ms', () => {
  const T0 = Date.parse('2026-11-20T09:00:00.000Z');
  const clock = new ManualClock(T0);
  let p: TestPostern;
  let a: ProjectWithKeys;
  let b: ProjectWithKeys;

  before(async () => {
    p = await startTestPostern({
      clock,
      console: true,
      config: { console: { events_poll_ms: 50, stream_check_ms: 100 } },
    });
    a = await createProjectWithKeys(p.ctx, 'project a');
    b = await createProjectWithKeys(p.ctx, 'project b');
  });
  after(async () => p?.close());

  test('a session idle past console.session_idle_seconds and a token past its expiry: their streams end', async () => {
    await operatorAccount(p.ctx, 'idle@example.com', 'owner');
    const client = await ConsoleClient.signIn(p.console, 'idle@example.com', PASSWORD);
    const expiring = expectStatus(
      await client.post('/tokens', {
        name: 'short',
        expires_at: new Date(T0 + 3600_000).toISOString(),
      }),
      201,
    );
    const bySession = await openStream(p.console, { cookie: client.cookie });
    const byToken = await openStream(p.console, { token: expiring.token });
    // Time moves on: past the token's expiry, within the session's idle time.
    clock.advance(3600_000 + 1000);
    await byToken.closedByServer();
    assert.equal(bySession.ended, false);
    clock.advance(p.config.console.session_idle_seconds * 1000);
    await bySession.closedByServer();
  });

  test('an operator removed or moved outside this server (the CLI’s own connection): their streams end, or stop carrying the lost project', async () => {
    const removed = await operatorAccount(p.ctx, 'cli-removed@example.com', 'member', [
      a.project.id,
    ]);
    const moved = await operatorAccount(p.ctx, 'cli-moved@example.com', 'member', [a.project.id]);
    const removedStream = await openStream(p.console, {
      cookie: (await ConsoleClient.signIn(p.console, removed.email, PASSWORD)).cookie,
    });
    const movedClient = await ConsoleClient.signIn(p.console, moved.email, PASSWORD);
    const movedAll = await openStream(p.console, { cookie: movedClient.cookie });
    const movedA = await openStream(
      p.console,
      { cookie: movedClient.cookie },
      `?project=${a.project.id}`,
    );
    await removeOperator(p.ctx, removed.id);
    await updateOperator(p.ctx, moved.id, { projects: [b.project.id] });
    await removedStream.closedByServer();
    await movedA.closedByServer();
    const lost = await send(p.sandbox, a.testKey);
    const kept = await send(p.sandbox, b.testKey);
    await movedAll.next(about(kept));
    assert.ok(!movedAll.events.some(about(lost)), JSON.stringify(movedAll.events));
    movedAll.close();
  });
});

describe('console live streams on two nodes of one PostgreSQL', {
  skip: postgresUnavailable(),
}, () => {
  let cluster: Awaited<ReturnType<typeof startTestNodes>>;
  before(async () => {
    cluster = await startTestNodes(2, {
      console: true,
      config: { console: { events_poll_ms: 50, stream_check_ms: 100 } },
    });
    await operatorAccount(cluster.nodes[0].ctx, 'owner@example.com', 'owner');
  });
  after(async () => cluster?.close());

  test('a sign-out and a token revocation on one node end the streams they opened on the other', async () => {
    const [one, two] = cluster.nodes;
    const onOne = await ConsoleClient.signIn(one.console, 'owner@example.com', PASSWORD);
    const token = expectStatus(await onOne.post('/tokens', { name: 'cluster' }), 201);
    const sessionStream = await openStream(one.console, { cookie: onOne.cookie });
    const tokenStream = await openStream(one.console, { token: token.token });
    const onTwo = new ConsoleClient(two.console);
    onTwo.cookie = onOne.cookie;
    onTwo.csrf = onOne.csrf;
    expectStatus(await onTwo.delete(`/tokens/${token.id}`), 200);
    await tokenStream.closedByServer();
    expectStatus(await onTwo.delete('/session'), 204);
    await sessionStream.closedByServer();
  });
});

describe('console live streams: a bulk action’s refresh', () => {
  let p: TestPostern;
  let a: ProjectWithKeys;
  let b: ProjectWithKeys;
  let owner: ConsoleClient;
  let member: ConsoleClient;

  before(async () => {
    ({ p, a, b, owner, member } = await consoleWorld({
      config: { console: { events_poll_ms: 50 } },
    }));
  });
  after(async () => p?.close());

  test('reaches only the streams that may see a message it changed, counting those alone', async () => {
    const memberStream = await openStream(p.console, { cookie: member.cookie });
    const ownerStream = await openStream(p.console, { cookie: owner.cookie });
    const sandboxOnly = await openStream(
      p.console,
      { cookie: owner.cookie },
      '?environment=sandbox',
    );
    try {
      const inB = await send(p.production, b.liveKey, { paused: true });
      const inA = await send(p.production, a.liveKey, { paused: true });
      await memberStream.next(about(inA));
      await ownerStream.next(about(inB));
      // Another project's bulk action: nothing for the member.
      expectStatus(await owner.post('/messages/bulk', { action: 'cancel', ids: [inB] }), 200);
      await ownerStream.next((e) => e.event === 'refresh');
      // One across both projects: the member hears of theirs only.
      const moreB = [
        await send(p.production, b.liveKey, { paused: true }),
        await send(p.production, b.liveKey, { paused: true }),
      ];
      await ownerStream.next(about(moreB[1]));
      expectStatus(
        await owner.post('/messages/bulk', {
          action: 'cancel',
          filter: { status: ['paused'], environment: 'production' },
        }),
        200,
      );
      const refreshes = (s: RawEventStream) =>
        s.events.filter((e) => e.event === 'refresh').map((e) => e.data);
      await waitFor(
        () => refreshes(ownerStream).length === 2,
        10_000,
        'the owner’s second refresh',
      );
      await memberStream.next((e) => e.event === 'refresh');
      assert.deepEqual(refreshes(ownerStream), [
        { reason: 'bulk', action: 'cancel', count: 1 },
        { reason: 'bulk', action: 'cancel', count: 3 },
      ]);
      assert.deepEqual(refreshes(memberStream), [{ reason: 'bulk', action: 'cancel', count: 1 }]);
      // Production messages only: the sandbox stream saw no bulk action at all.
      const sandboxMessage = await send(p.sandbox, a.testKey);
      await sandboxOnly.next(about(sandboxMessage));
      assert.deepEqual(refreshes(sandboxOnly), []);
    } finally {
      memberStream.close();
      ownerStream.close();
      sandboxOnly.close();
    }
  });
});

const BURST = 5000;

/**
 * BURST messages of `project` in the index (history: written before any stream opens), and a
 * way to announce all of them again: a round writes a `mail.accepted` event of each to the
 * outbox on the suite's own connection, which the server's outbox reader announces to every
 * stream, 5,000 at once, as an acceptance burst would.
 */
async function burstMessages(
  p: TestPostern,
  project: string,
): Promise<{ ids: string[]; round(): Promise<void> }> {
  const now = Date.now();
  const ids = Array.from({ length: BURST }, (_, i) => `m.0zzzzzzzz${String(i).padStart(17, '0')}`);
  await p.ctx.store.transaction(async (tx) => {
    for (const id of ids) {
      const row: NewMessageRow = {
        id,
        project_id: project,
        environment: 'production',
        source: 'http',
        status: 'queued',
        hold_reason: null,
        from_email: 'burst@example.com',
        recipients: JSON.stringify({ to: ['x@example.org'], cc: [], bcc: [] }),
        subject: 'burst',
        tags: '[]',
        metadata: '{}',
        category: null,
        routing: '{}',
        provider_options: null,
        scheduled_at: null,
        spool_path: 'none.eml',
        size_bytes: 100,
        idempotency_key: null,
        created_at: now,
        updated_at: now,
        next_attempt_at: now,
      };
      await insertMessage(tx, row);
    }
  });
  const ROWS = 500;
  return {
    ids,
    round: () =>
      p.ctx.store.transaction(async (tx) => {
        for (let i = 0; i < ids.length; i += ROWS) {
          const chunk = ids.slice(i, i + ROWS);
          const values = chunk.map(() => "(?, ?, 'mail.accepted', ?, '{}')").join(', ');
          await tx.run(
            `INSERT INTO events (project_id, message_id, type, created_at, data) VALUES ${values}`,
            ...chunk.flatMap((id) => [project, id, Date.now()]),
          );
        }
      }),
  };
}

/**
 * Announces the burst again and again until `enough` (the server's own figures say so): a
 * socket nobody reads takes a few MiB into the kernel's buffers before anything waits in the
 * server. Throws past `rounds`, or as soon as `bounded` fails (memory grew: the bound is not held).
 */
async function announceUntil(
  burst: { round(): Promise<void> },
  enough: () => Promise<boolean>,
  bounded: () => void,
  rounds = 16,
): Promise<number> {
  for (let round = 1; round <= rounds; round++) {
    await burst.round();
    bounded();
    try {
      await waitFor(enough, 2000, 'the server to say so');
      return round;
    } catch {
      // not yet: another round
    }
  }
  throw new Error(`not reached after ${rounds} rounds of ${BURST} announcements`);
}

describe('console live streams that do not read', () => {
  const QUEUE = 16 * 1024;
  const SLOW = 100;
  /** Far above what the bound lets 100 streams take (the issue saw +168 MiB for 100 streams and 5,000 events). */
  const GROWTH_MIB = 96;

  test('each queues at most console.stream_max_queued_bytes, then gets one refresh for what it missed; a reading stream carries on; memory stays flat', async (t) => {
    const p = await startTestPostern({
      console: true,
      config: {
        console: {
          events_poll_ms: 50,
          stream_check_ms: NEVER_MS,
          stream_max_queued_bytes: QUEUE,
          max_streams: SLOW + 10,
          max_streams_per_operator: SLOW + 10,
          max_connections: SLOW + 20,
          max_connections_per_ip: SLOW + 20,
        },
      },
    });
    const slow: RawEventStream[] = [];
    let reader: RawEventStream | null = null;
    try {
      const pk = await createProjectWithKeys(p.ctx, 'burst');
      await operatorAccount(p.ctx, 'owner@example.com', 'owner');
      const owner = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
      const token = expectStatus(await owner.post('/tokens', { name: 'streams' }), 201)
        .token as string;
      const burst = await burstMessages(p, pk.project.id);
      // The reading stream keeps only what it needs: the refreshes and messages not of the burst.
      const burstIds = new Set(burst.ids);
      reader = await RawEventStream.open(p.console, {
        token,
        keep: (e) => e.event === 'refresh' || !burstIds.has(e.data.id),
      });
      for (let i = 0; i < SLOW; i++)
        slow.push(await RawEventStream.open(p.console, { token, paused: true }));
      assert.deepEqual(new Set(slow.map((s) => s.status)), new Set([200]));
      const rss = watchPeakRss(process.pid);
      const grown = () => (rss.peakSoFar() - rss.baseline) / MiB;
      // Until every slow stream has fallen behind and had its refresh queued (the server counts them).
      const rounds = await announceUntil(
        burst,
        async () =>
          ((await metrics(p.console)).get('postern_console_stream_overflows_total{}') ?? 0) >= SLOW,
        () =>
          assert.ok(
            grown() < GROWTH_MIB,
            `RSS grew ${grown().toFixed(1)} MiB before every slow stream fell behind`,
          ),
      );
      const figures = await metrics(p.console);
      const peak = rss.stop();
      assert.ok(
        figures.get('postern_console_stream_queued_bytes_peak{}')! <= QUEUE,
        `peak queue ${figures.get('postern_console_stream_queued_bytes_peak{}')} bytes`,
      );
      assert.ok(figures.get('postern_console_stream_queued_bytes_peak{}')! > 0);
      assert.equal(figures.get('postern_console_streams_open{}'), SLOW + 1);
      const growth = (peak.peak - peak.baseline) / MiB;
      assert.ok(growth < GROWTH_MIB, `RSS grew ${growth.toFixed(1)} MiB over ${rounds} rounds`);
      t.diagnostic(
        `${SLOW} streams not reading, ${rounds} round(s) of ${BURST}: RSS +${growth.toFixed(1)} MiB, largest queue ${figures.get('postern_console_stream_queued_bytes_peak{}')} bytes`,
      );
      // The reader carries on: what comes after the bursts reaches it.
      const afterBurst = await send(p.production, pk.liveKey);
      await reader.next(about(afterBurst), 30_000);
      // A slow stream, read at last: the burst's messages it had room for, then one refresh in
      // place of the rest; the queue it had was handed to the kernel meanwhile, so what came
      // after the bursts followed, and what comes now follows that.
      const late = slow[0];
      late.resume();
      await late.next(about(afterBurst), 30_000);
      const next = await send(p.production, pk.liveKey);
      await late.next(about(next), 30_000);
      const at = late.events.findIndex((e) => e.event === 'refresh');
      assert.ok(at > 0, JSON.stringify(late.events.slice(0, 3)));
      assert.deepEqual(late.events[at].data, { reason: 'overflow' });
      const before = late.events.slice(0, at).map((e) => e.data.id as string);
      assert.ok(
        before.every((id) => burstIds.has(id)) && new Set(before).size === before.length,
        'before the refresh: burst messages, each once',
      );
      const rest = late.events.slice(at + 1);
      assert.deepEqual(
        rest.slice(-2).map((e) => e.data.id),
        [afterBurst, next],
      );
      assert.ok(
        rest
          .slice(0, -2)
          .every(
            (e) =>
              (e.event === 'refresh' && e.data.reason === 'overflow') || burstIds.has(e.data.id),
          ),
        'between: only later rounds',
      );
    } finally {
      for (const s of slow) s.close();
      reader?.close();
      await p.close();
    }
  });

  test('one still behind at the next check is closed, and its operator’s place is free again', async () => {
    // A queue that takes a whole burst: rounds fill the kernel's buffers of the socket nobody reads, then the server's queue stays full.
    const p = await startTestPostern({
      console: true,
      config: {
        console: {
          events_poll_ms: 50,
          stream_check_ms: 100,
          stream_max_queued_bytes: 1024 * 1024,
          max_streams_per_operator: 1,
        },
      },
    });
    try {
      const pk = await createProjectWithKeys(p.ctx, 'stall');
      await operatorAccount(p.ctx, 'owner@example.com', 'owner');
      const owner = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
      const burst = await burstMessages(p, pk.project.id);
      const stalled = await RawEventStream.open(p.console, { cookie: owner.cookie, paused: true });
      assert.equal(stalled.status, 200);
      const refused = await RawEventStream.open(p.console, { cookie: owner.cookie });
      assert.equal(refused.status, 429);
      refused.close();
      await announceUntil(
        burst,
        async () =>
          ((await metrics(p.console)).get('postern_console_streams_closed_total{reason=stalled}') ??
            0) >= 1,
        () => undefined,
      );
      assert.equal((await metrics(p.console)).get('postern_console_streams_open{}'), 0);
      // What it was sent before it was closed can still be read, then the end.
      stalled.resume();
      await stalled.closedByServer(30_000);
      const reopened = await openStream(p.console, { cookie: owner.cookie });
      const next = await send(p.production, pk.liveKey);
      await reopened.next(about(next), 30_000);
      reopened.close();
    } finally {
      await p.close();
    }
  });
});
