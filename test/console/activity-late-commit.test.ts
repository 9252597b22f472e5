/**
 * The overview's and live updates' reader of the events outbox (operator/activity.ts) on
 * PostgreSQL, where seqs commit out of order: a transaction that took seq n and commits after
 * another one committed n + 1 is still read, once. Two connections of one database produce the
 * interleaving for real.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { ManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/log.js';
import { ActivityTail } from '../../src/operator/activity.js';
import { GAP_WAIT_MS, SeqFollower } from '../../src/operator/seqFollower.js';
import { type ActivityEvent, eventsAfterSeq, eventsAtSeqs } from '../../src/store/activity.js';
import { insertEvent } from '../../src/store/events.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { insertProject } from '../../src/store/projects.js';
import { getValue, type Queries } from '../../src/store/queries.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  sharedPostgres,
  testPool,
} from '../support/postgres.js';

const T0 = Date.parse('2026-11-20T09:00:00.000Z');
const skip = postgresUnavailable();

let database: FreshDatabase;
let pool: pg.Pool;
let q: Queries;

before(async () => {
  if (skip) return;
  database = await freshDatabase((await sharedPostgres()).url);
  pool = testPool(database.url, 4);
  await migratePostgres(pool, silentLogger());
  q = postgresQueries(pool);
  await insertProject(q, { id: 'p.late', name: 'late', plan: 'pro', created_at: T0 });
});
after(async () => {
  await pool?.end();
  await database?.drop();
});

const accepted = (messageId: string) => ({
  project_id: 'p.late',
  message_id: messageId,
  type: 'mail.accepted' as const,
  created_at: T0,
  data: '{}',
});
const seqOf = async (messageId: string) =>
  (await getValue<number>(q, 'SELECT seq FROM events WHERE message_id = ?', messageId))!;

test('an event whose seq commits after a higher one is read once it commits, and only once; a plain "seq > cursor" reader would have skipped it', {
  skip,
}, async () => {
  const clock = new ManualClock(T0);
  const tail = new ActivityTail(q, clock);
  const read: string[] = [];
  tail.subscribe((events) => read.push(...events.map((e) => e.message_id!)));
  await tail.catchUp();

  // Connection 1 takes a seq and holds its transaction open; connection 2 takes the next one and commits.
  let commitLate!: () => void;
  const held = new Promise<void>((resolve) => (commitLate = resolve));
  let inserted!: () => void;
  const lateInserted = new Promise<void>((resolve) => (inserted = resolve));
  const late = q.transaction(async (tx) => {
    await insertEvent(tx, accepted('m.late'));
    inserted();
    await held;
  });
  await lateInserted;
  await insertEvent(q, accepted('m.early'));
  clock.advance(1000);
  await tail.catchUp();
  assert.deepEqual(read, ['m.early']);

  commitLate();
  await late;
  assert.ok(
    (await seqOf('m.late')) < (await seqOf('m.early')),
    'the late event holds the lower seq',
  );
  assert.deepEqual(
    await eventsAfterSeq(q, await seqOf('m.early'), 10),
    [],
    'past the higher seq, a plain cursor finds nothing',
  );
  clock.advance(1000);
  await tail.catchUp();
  assert.deepEqual(read, ['m.early', 'm.late']);
  assert.equal(
    tail.hourlyCounts(null).reduce((n, h) => n + h.counts.accepted, 0),
    2,
  );

  // Read once: later catch-ups, past the time a gap is looked for too, add nothing.
  await tail.catchUp();
  clock.advance(GAP_WAIT_MS + 1000);
  await insertEvent(q, { ...accepted('m.after'), created_at: clock.now() });
  await tail.catchUp();
  assert.deepEqual(read, ['m.early', 'm.late', 'm.after']);
});

test('a seq skipped by a rolled-back insert is asked for again until a minute after the event above it, then no more', {
  skip,
}, async () => {
  const clock = new ManualClock(T0);
  // The store's own reads; what the follower asks for again is recorded on the way.
  const askedAgain: number[][] = [];
  const follower = new SeqFollower<ActivityEvent>(
    {
      after: (seq, limit) => eventsAfterSeq(q, seq, limit),
      at: (seqs) => {
        askedAgain.push(seqs);
        return eventsAtSeqs(q, seqs);
      },
      timeOf: (e) => e.created_at,
    },
    (await getValue<number>(q, 'SELECT COALESCE(MAX(seq), 0) FROM events')) ?? 0,
  );
  await q
    .transaction(async (tx) => {
      await insertEvent(tx, accepted('m.rolled-back'));
      throw new Error('roll back');
    })
    .catch(() => undefined);
  await insertEvent(q, accepted('m.kept'));
  const kept = await seqOf('m.kept');
  assert.deepEqual(
    (await follower.next(100, clock.now())).rows.map((e) => e.message_id),
    ['m.kept'],
  );
  assert.deepEqual(askedAgain, []);
  clock.advance(GAP_WAIT_MS);
  assert.deepEqual((await follower.next(100, clock.now())).rows, []);
  assert.deepEqual(
    askedAgain,
    [[kept - 1]],
    'the seq the rolled-back insert took is asked for again',
  );
  clock.advance(1);
  assert.deepEqual((await follower.next(100, clock.now())).rows, []);
  assert.deepEqual(askedAgain, [[kept - 1]], 'a minute after the event above it, no more');
});
