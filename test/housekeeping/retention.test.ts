/**
 * Retention (`retention_days`): finished messages, their spool files, attempts and events, and
 * Idempotency-Keys are removed once older than the project's retention; live messages never.
 * A ManualClock moves the server 31 days on; the sweep runs at start and hourly. On PostgreSQL
 * every body is rows (message_body_chunks), removed with its message: no file is ever named.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { DirectBookkeeping } from '../../src/commit/directBookkeeping.js';
import { cancelMessage } from '../../src/operator/messages.js';
import { writeTempFileSync } from '../../src/spool/spool.js';
import { eventsForMessage } from '../../src/store/events.js';
import {
  pruneFinishedMessageRows,
  pruneFinishedMessages,
} from '../../src/store/messageRetention.js';
import { getMessage } from '../../src/store/messages.js';
import { HOUSEKEEPING_LOCK } from '../../src/store/postgres/housekeepingLock.js';
import { getValue } from '../../src/store/queries.js';
import {
  createProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  tempStateDir,
  validMessage,
} from '../support/postern.js';
import { sqliteOnly, testStore } from '../support/postgres.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';

const DAY = 86_400_000;
const T0 = Date.parse('2026-03-01T10:00:00Z');

/**
 * Sends a message over spool.index_body_max_bytes, so that it is a spool file (these tests are
 * about the files); `small`: one whose body the index keeps.
 */
async function send(
  p: TestPostern,
  key: string,
  idempotencyKey?: string,
  opts: { small?: boolean } = {},
): Promise<string> {
  const json = validMessage(opts.small ? {} : { text: 'x'.repeat(70_000) });
  const res = await post(p.production, '/v1/send', {
    key,
    json,
    headers: idempotencyKey ? { 'idempotency-key': idempotencyKey } : {},
  });
  assert.equal(res.status, 202, res.text);
  return res.body.id as string;
}

const spoolFile = async (p: TestPostern, id: string) =>
  path.join(p.stateDir, 'spool', (await getMessage(p.ctx.store, id))!.spool_path);

const onPostgres = testStore() === 'postgres';

/** Where a message's stored body is looked for once its row may be gone: its spool file (SQLite), or its rows in message_body_chunks (PostgreSQL). */
interface StoredBody {
  id: string;
  file: string | null;
}

async function storedBody(p: TestPostern, id: string): Promise<StoredBody> {
  return { id, file: onPostgres ? null : await spoolFile(p, id) };
}

async function bodyKept(p: TestPostern, body: StoredBody): Promise<boolean> {
  if (body.file !== null) return existsSync(body.file);
  return (
    (await getValue<number>(
      p.ctx.store,
      'SELECT COUNT(*) FROM message_body_chunks WHERE message_id = ?',
      body.id,
    ))! > 0
  );
}

test('finished messages past retention lose their row, events and spool file; live and recent ones stay', async (t) => {
  const stateDir = tempStateDir();
  t.after(() => rmSync(stateDir, { recursive: true, force: true }));
  const clock = new ManualClock(T0);
  let p = await startTestPostern({ clock, stateDir, config: { retention_days: 30 } });
  const { liveKey } = await createProjectWithKeys(p.ctx);
  const old = await send(p, liveKey, 'retention-key-0001');
  await cancelMessage(p.ctx, old);
  const live = await send(p, liveKey);
  const oldBody = await storedBody(p, old);
  const liveBody = await storedBody(p, live);
  clock.advance(10 * DAY);
  const recent = await send(p, liveKey);
  await cancelMessage(p.ctx, recent);
  const recentBody = await storedBody(p, recent);
  for (const body of [oldBody, liveBody, recentBody]) assert.ok(await bodyKept(p, body));
  assert.ok((await eventsForMessage(p.ctx.store, old)).length > 0);
  await p.close();

  // 31 days after the first sends: the sweep at start removes what is due.
  clock.set(T0 + 31 * DAY);
  p = await startTestPostern({ clock, stateDir, config: { retention_days: 30 } });
  try {
    await waitFor(
      async () => (await getMessage(p.ctx.store, old)) === undefined,
      HANG_GUARD_MS,
      'the old cancelled message to be removed',
    );
    assert.deepEqual(await eventsForMessage(p.ctx.store, old), []);
    await waitFor(
      async () => !(await bodyKept(p, oldBody)),
      HANG_GUARD_MS,
      'its spool file to be removed',
    );
    // Queued (live) for 31 days: kept, with its file; finished 21 days ago: kept.
    assert.equal((await getMessage(p.ctx.store, live))?.status, 'queued');
    assert.ok(await bodyKept(p, liveBody));
    assert.equal((await getMessage(p.ctx.store, recent))?.status, 'cancelled');
    assert.ok(await bodyKept(p, recentBody));
    // The Idempotency-Key's window is the same retention: the key now sends a new message.
    const again = await send(p, liveKey, 'retention-key-0001');
    assert.notEqual(again, old);
  } finally {
    await p.close();
  }
});

test('a project retention shorter than the default removes its messages sooner', async (t) => {
  const clock = new ManualClock(T0);
  const p = await startTestPostern({ clock, config: { retention_days: 30 } });
  t.after(() => p.close());
  const { project, liveKey } = await createProjectWithKeys(p.ctx);
  const id = await send(p, liveKey);
  await cancelMessage(p.ctx, id);
  await p.ctx.store.run('UPDATE projects SET retention_days = 3 WHERE id = ?', project.id);
  const spoolPath = (await getMessage(p.ctx.store, id))!.spool_path;
  const body = await storedBody(p, id);
  assert.deepEqual(await pruneFinishedMessages(p.ctx.store, T0 + 2 * DAY, 30, 100), []);
  assert.ok(await bodyKept(p, body));
  // The file to retire once committed (none on PostgreSQL: the body went with the row).
  assert.deepEqual(
    await pruneFinishedMessages(p.ctx.store, T0 + 4 * DAY, 30, 100),
    onPostgres ? [] : [spoolPath],
  );
  assert.equal(await getMessage(p.ctx.store, id), undefined);
  if (onPostgres) assert.equal(await bodyKept(p, body), false);
});

test('an event a pending webhook delivery still has to send outlives its pruned message', async (t) => {
  const clock = new ManualClock(T0);
  const p = await startTestPostern({
    clock,
    config: { retention_days: 30, webhooks: { enabled: false } },
  });
  t.after(() => p.close());
  const { project, liveKey } = await createProjectWithKeys(p.ctx);
  const id = await send(p, liveKey);
  await cancelMessage(p.ctx, id);
  const store = p.ctx.store;
  // mail.accepted, and a second event of the message that no delivery waits for.
  await store.run(
    "INSERT INTO events (project_id, message_id, type, created_at, data) VALUES (?, ?, 'mail.failed', ?, '{}')",
    project.id,
    id,
    T0,
  );
  const events = await eventsForMessage(store, id);
  assert.deepEqual(
    events.map((e) => e.type),
    ['mail.accepted', 'mail.failed'],
  );
  await store.run(
    "INSERT INTO webhook_endpoints (id, project_id, url, secret, from_seq, created_at) VALUES ('we_1', ?, 'https://hooks.example.com/', 's', 0, ?)",
    project.id,
    T0,
  );
  await store.run(
    "INSERT INTO webhook_deliveries (seq, id, endpoint_id, event_seq, type, status, created_at) VALUES (1, 'wd_1', 'we_1', ?, ?, 'pending', ?)",
    events[0].seq,
    events[0].type,
    T0,
  );
  assert.equal((await pruneFinishedMessageRows(store, T0 + 31 * DAY, 30, 100)).removed, 1);
  assert.equal(await getMessage(store, id), undefined);
  assert.deepEqual(
    (await eventsForMessage(store, id)).map((e) => e.seq),
    [events[0].seq],
  );
});

test('a finished small message past retention loses its body in the index with its row, and names no file to retire', async (t) => {
  const clock = new ManualClock(T0);
  const p = await startTestPostern({ clock, config: { retention_days: 30 } });
  t.after(() => p.close());
  const { liveKey } = await createProjectWithKeys(p.ctx);
  const small = await send(p, liveKey, undefined, { small: true });
  const large = await send(p, liveKey);
  for (const id of [small, large]) await cancelMessage(p.ctx, id);
  // SQLite keeps a small body in the index, a large one in a file; PostgreSQL keeps every body as rows.
  const bodyTable = onPostgres ? 'message_body_chunks' : 'message_bodies';
  const bodies = async () =>
    (
      await p.ctx.store.all<{ message_id: string }>(
        `SELECT DISTINCT message_id FROM ${bodyTable} WHERE message_id IN (?, ?) ORDER BY message_id`,
        small,
        large,
      )
    ).map((r) => r.message_id);
  assert.deepEqual(await bodies(), onPostgres ? [small, large].sort() : [small]);
  const largePath = (await getMessage(p.ctx.store, large))!.spool_path;
  assert.deepEqual(
    await pruneFinishedMessages(p.ctx.store, T0 + 31 * DAY, 30, 100),
    onPostgres ? [] : [largePath],
  );
  assert.equal(await getMessage(p.ctx.store, small), undefined);
  assert.equal(await getMessage(p.ctx.store, large), undefined);
  assert.deepEqual(await bodies(), []);
});

test('a sweep removes at most one chunk per transaction and finds the rest next time', async (t) => {
  const clock = new ManualClock(T0);
  const p = await startTestPostern({ clock, config: { retention_days: 30 } });
  t.after(() => p.close());
  const { liveKey } = await createProjectWithKeys(p.ctx);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const id = await send(p, liveKey);
    await cancelMessage(p.ctx, id);
    ids.push(id);
  }
  const later = T0 + 31 * DAY;
  // Each chunk names a file per message on SQLite (these are spool files), none on PostgreSQL.
  for (const expected of [2, 2, 1, 0]) {
    const chunk = await pruneFinishedMessageRows(p.ctx.store, later, 30, 2);
    assert.equal(chunk.removed, expected);
    assert.equal(chunk.spoolFiles.length, onPostgres ? 0 : expected);
  }
  for (const id of ids) assert.equal(await getMessage(p.ctx.store, id), undefined);
});

test('on PostgreSQL one node at a time prunes and sweeps: a node that finds another holding the housekeeping lock skips that round', {
  skip: onPostgres ? false : "the housekeeping lock is PostgreSQL's (several nodes on one store)",
}, async (t) => {
  const clock = new ManualClock(T0);
  const p = await startTestPostern({ clock, config: { retention_days: 30 } });
  t.after(() => p.close());
  const { liveKey } = await createProjectWithKeys(p.ctx);
  const id = await send(p, liveKey, 'housekeeping-key-01');
  await cancelMessage(p.ctx, id);
  // Another node's writes, as its janitor makes them, 31 days on.
  const node = new DirectBookkeeping(p.ctx.store);
  const later = T0 + 31 * DAY;
  const sweep = async () =>
    (await node.write('retention', { now: later, defaultRetentionDays: 30, limit: 100 })).result;
  const prune = async () =>
    (await node.write('prune', { now: later, retentionDays: 30, sessionIdleSeconds: 3600 })).result;
  await p.ctx.store.transaction(async (busy) => {
    // A node's round under way: it holds the lock until its transaction ends.
    await busy.get('SELECT pg_advisory_xact_lock(?)', HOUSEKEEPING_LOCK);
    assert.deepEqual(await sweep(), { skipped: true, removed: 0, spoolFiles: [] });
    assert.deepEqual(await prune(), {
      skipped: true,
      idempotencyKeys: 0,
      receipts: 0,
      sessions: 0,
      nodes: 0,
    });
    assert.equal(
      (await getMessage(p.ctx.store, id))?.status,
      'cancelled',
      'nothing removed by the node that skipped',
    );
  });
  // The round over, the next one does the work.
  assert.deepEqual(await sweep(), { skipped: false, removed: 1, spoolFiles: [] });
  assert.equal((await prune()).idempotencyKeys, 1);
  assert.equal(await getMessage(p.ctx.store, id), undefined);
});

test("a retired spool file is emptied, kept across a restart, and becomes a later message's file", {
  skip: sqliteOnly(),
}, async (t) => {
  const stateDir = tempStateDir();
  t.after(() => rmSync(stateDir, { recursive: true, force: true }));
  const freeDir = path.join(stateDir, 'spool', 'free');
  const clock = new ManualClock(T0);
  let p = await startTestPostern({ clock, stateDir, config: { retention_days: 30 } });
  const { liveKey } = await createProjectWithKeys(p.ctx);
  const old = await send(p, liveKey);
  await cancelMessage(p.ctx, old);
  const oldInode = statSync(await spoolFile(p, old)).ino;
  await p.close();

  clock.set(T0 + 31 * DAY);
  p = await startTestPostern({ clock, stateDir, config: { retention_days: 30 } });
  try {
    await waitFor(
      () => readdirSync(freeDir).length === 1,
      HANG_GUARD_MS,
      'the old file to be retired',
    );
    const [retired] = readdirSync(freeDir);
    assert.equal(statSync(path.join(freeDir, retired)).ino, oldInode);
    assert.equal(
      statSync(path.join(freeDir, retired)).size,
      0,
      'nothing of the old message is kept',
    );
  } finally {
    await p.close();
  }

  // The next run adopts it; the next message is written into it.
  p = await startTestPostern({ clock, stateDir, config: { retention_days: 30 } });
  try {
    const next = await send(p, liveKey);
    const file = await spoolFile(p, next);
    assert.equal(statSync(file).ino, oldInode);
    assert.deepEqual(readdirSync(freeDir), []);
    const mime = readFileSync(file, 'latin1');
    assert.equal(mime.length, (await getMessage(p.ctx.store, next))!.size_bytes);
    assert.match(mime, new RegExp(`^Message-ID: <${next.replace('.', '\\.')}@example\\.com>`, 'm'));
  } finally {
    await p.close();
  }
});

test('a temp file is created anew when the retired file it was given is gone', (t) => {
  const dir = tempStateDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const target = path.join(dir, 'm.tmp');
  writeTempFileSync(target, Buffer.from('hello'), path.join(dir, 'no-such-retired-file'));
  assert.equal(readFileSync(target, 'utf8'), 'hello');
  assert.equal(statSync(target).mode & 0o777, 0o600);
});
