/**
 * Retention (`retention_days`): finished messages, their spool files, attempts and events, and
 * Idempotency-Keys are removed once older than the project's retention; live messages never.
 * A ManualClock moves the server 31 days on; the sweep runs at start and hourly.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { cancelMessage } from '../../src/operator/messages.js';
import { sql } from '../../src/store/db.js';
import { sqliteQueries } from '../../src/store/queries.js';
import { eventsForMessage } from '../../src/store/events.js';
import { getMessage } from '../../src/store/messages.js';
import { pruneFinishedMessages } from '../../src/store/messageRetention.js';
import { writeTempFileSync } from '../../src/spool/spool.js';
import { createProjectWithKeys, post, startTestPostern, tempStateDir, validMessage, type TestPostern } from '../support/postern.js';
import { waitFor } from '../support/waiting.js';

const DAY = 86_400_000;
const T0 = Date.parse('2026-03-01T10:00:00Z');

/**
 * Sends a message over spool.index_body_max_bytes, so that it is a spool file (these tests are
 * about the files); `small`: one whose body the index keeps.
 */
async function send(p: TestPostern, key: string, idempotencyKey?: string, opts: { small?: boolean } = {}): Promise<string> {
  const json = validMessage(opts.small ? {} : { text: 'x'.repeat(70_000) });
  const res = await post(p.production, '/v1/send', { key, json, headers: idempotencyKey ? { 'idempotency-key': idempotencyKey } : {} });
  assert.equal(res.status, 202, res.text);
  return res.body.id as string;
}

const spoolFile = async (p: TestPostern, id: string) => path.join(p.stateDir, 'spool', (await getMessage(p.ctx.store, id))!.spool_path);

test('finished messages past retention lose their row, events and spool file; live and recent ones stay', async (t) => {
  const stateDir = tempStateDir();
  t.after(() => rmSync(stateDir, { recursive: true, force: true }));
  const clock = new ManualClock(T0);
  let p = await startTestPostern({ clock, stateDir, config: { retention_days: 30 } });
  const { liveKey } = await createProjectWithKeys(p.ctx);
  const old = await send(p, liveKey, 'retention-key-0001');
  await cancelMessage(p.ctx, old);
  const live = await send(p, liveKey);
  const oldFile = await spoolFile(p, old);
  const liveFile = await spoolFile(p, live);
  clock.advance(10 * DAY);
  const recent = await send(p, liveKey);
  await cancelMessage(p.ctx, recent);
  const recentFile = await spoolFile(p, recent);
  assert.ok((await eventsForMessage(p.ctx.store, old)).length > 0);
  await p.close();

  // 31 days after the first sends: the sweep at start removes what is due.
  clock.set(T0 + 31 * DAY);
  p = await startTestPostern({ clock, stateDir, config: { retention_days: 30 } });
  try {
    await waitFor(async () => (await getMessage(p.ctx.store, old)) === undefined, 10_000, 'the old cancelled message to be removed');
    assert.deepEqual(await eventsForMessage(p.ctx.store, old), []);
    await waitFor(() => !existsSync(oldFile), 5_000, 'its spool file to be removed');
    // Queued (live) for 31 days: kept, with its file; finished 21 days ago: kept.
    assert.equal((await getMessage(p.ctx.store, live))?.status, 'queued');
    assert.ok(existsSync(liveFile));
    assert.equal((await getMessage(p.ctx.store, recent))?.status, 'cancelled');
    assert.ok(existsSync(recentFile));
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
  sql(p.db, 'UPDATE projects SET retention_days = 3 WHERE id = ?').run(project.id);
  const spoolPath = (await getMessage(p.ctx.store, id))!.spool_path;
  assert.deepEqual(await pruneFinishedMessages(p.ctx.store, T0 + 2 * DAY, 30, 100), []);
  assert.deepEqual(await pruneFinishedMessages(p.ctx.store, T0 + 4 * DAY, 30, 100), [spoolPath]);
  assert.equal(await getMessage(p.ctx.store, id), undefined);
});

test('an event a pending webhook delivery still has to send outlives its pruned message', async (t) => {
  const clock = new ManualClock(T0);
  const p = await startTestPostern({ clock, config: { retention_days: 30, webhooks: { enabled: false } } });
  t.after(() => p.close());
  const { project, liveKey } = await createProjectWithKeys(p.ctx);
  const id = await send(p, liveKey);
  await cancelMessage(p.ctx, id);
  const db = p.db;
  // mail.accepted, and a second event of the message that no delivery waits for.
  sql(db, "INSERT INTO events (project_id, message_id, type, created_at, data) VALUES (?, ?, 'mail.failed', ?, '{}')").run(project.id, id, T0);
  const events = await eventsForMessage(sqliteQueries(db), id);
  assert.deepEqual(
    events.map((e) => e.type),
    ['mail.accepted', 'mail.failed'],
  );
  sql(db, "INSERT INTO webhook_endpoints (id, project_id, url, secret, from_seq, created_at) VALUES ('we_1', ?, 'https://hooks.example.com/', 's', 0, ?)").run(project.id, T0);
  sql(db, "INSERT INTO webhook_deliveries (seq, id, endpoint_id, event_seq, type, status, created_at) VALUES (1, 'wd_1', 'we_1', ?, ?, 'pending', ?)").run(events[0].seq, events[0].type, T0);
  assert.equal((await pruneFinishedMessages(sqliteQueries(db), T0 + 31 * DAY, 30, 100)).length, 1);
  assert.equal(await getMessage(sqliteQueries(db), id), undefined);
  assert.deepEqual(
    (await eventsForMessage(sqliteQueries(db), id)).map((e) => e.seq),
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
  const bodies = () => sql(p.db, 'SELECT message_id FROM message_bodies WHERE message_id IN (?, ?)').pluck().all(small, large);
  assert.deepEqual(bodies(), [small]);
  const largePath = (await getMessage(p.ctx.store, large))!.spool_path;
  assert.deepEqual(await pruneFinishedMessages(p.ctx.store, T0 + 31 * DAY, 30, 100), [largePath]);
  assert.equal(await getMessage(p.ctx.store, small), undefined);
  assert.deepEqual(bodies(), []);
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
  assert.equal((await pruneFinishedMessages(p.ctx.store, later, 30, 2)).length, 2);
  assert.equal((await pruneFinishedMessages(p.ctx.store, later, 30, 2)).length, 2);
  assert.equal((await pruneFinishedMessages(p.ctx.store, later, 30, 2)).length, 1);
  assert.equal((await pruneFinishedMessages(p.ctx.store, later, 30, 2)).length, 0);
  for (const id of ids) assert.equal(await getMessage(p.ctx.store, id), undefined);
});

test('a retired spool file is emptied, kept across a restart, and becomes a later message\'s file', async (t) => {
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
    await waitFor(() => readdirSync(freeDir).length === 1, 10_000, 'the old file to be retired');
    const [retired] = readdirSync(freeDir);
    assert.equal(statSync(path.join(freeDir, retired)).ino, oldInode);
    assert.equal(statSync(path.join(freeDir, retired)).size, 0, 'nothing of the old message is kept');
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
