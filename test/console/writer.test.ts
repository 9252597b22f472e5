/**
 * The console's writes go through the index writer thread: once the listeners are open, the
 * server's own connection (the event loop's) is read-only (`PRAGMA query_only`), so any write
 * there would throw. The console's operations all succeed anyway, each with its audit row. On
 * PostgreSQL (no writer thread: each write one transaction of the node's pool) the same writes
 * succeed with their audit rows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { operatorWriteIsDurable } from '../../src/commit/operatorBookkeeping.js';
import { listAudit } from '../../src/store/audit.js';
import { sql } from '../../src/store/db.js';
import { findOperatorSession, touchOperatorSession } from '../../src/store/operatorSessions.js';
import {
  ConsoleClient,
  consoleWorld,
  expectError,
  expectStatus,
  PASSWORD,
} from '../support/console.js';
import { type ProjectWithKeys, post, type TestPostern, validMessage } from '../support/postern.js';
import { sqliteOnly } from '../support/postgres.js';

const stamp = { at: 0, actor: 'cli', actor_email: null, client_ip: null };

describe('console writes through the index writer', () => {
  let p: TestPostern;
  let a: ProjectWithKeys;
  let owner: ConsoleClient;

  before(async () => {
    ({ p, a, owner } = await consoleWorld({
      config: { webhooks: { allow_private_targets: true, enabled: false } },
    }));
  });
  after(async () => {
    await p?.close();
  });

  test('once the listeners are open the server’s own connection is read-only: a write on it is refused', {
    skip: sqliteOnly(),
  }, () => {
    assert.equal(p.running.db!.pragma('query_only', { simple: true }), 1);
    assert.throws(() => sql(p.running.db!, 'UPDATE projects SET name = name').run(), /readonly/i);
  });

  test('every kind of console write succeeds, each committed with its audit row, while the server’s connection only reads', async () => {
    const project = expectStatus(
      await owner.post('/projects', { name: 'writes', plan: 'free' }),
      201,
    );
    expectStatus(await owner.put(`/projects/${project.id}/plan`, { plan: 'pro' }), 200);
    expectStatus(
      await owner.put(`/projects/${project.id}/strategy`, { strategy: 'round-robin' }),
      200,
    );
    expectStatus(await owner.post(`/projects/${project.id}/pause`), 200);
    expectStatus(await owner.post(`/projects/${project.id}/resume`), 200);
    const key = expectStatus(
      await owner.post(`/projects/${project.id}/keys`, { mode: 'live' }),
      201,
    );
    const rotated = expectStatus(
      await owner.post(`/keys/${key.id}/rotate`, { grace_seconds: 0 }),
      201,
    );
    expectStatus(await owner.post(`/keys/${rotated.key.id}/revoke`), 200);
    const account = expectStatus(
      await owner.post(`/projects/${project.id}/providers`, {
        slug: 'smtp',
        host: '127.0.0.1',
        port: 9,
        tls: 'none',
      }),
      201,
    );
    expectStatus(await owner.patch(`/providers/${account.id}`, { priority: 5 }), 200);
    expectStatus(await owner.delete(`/providers/${account.id}`), 200);
    expectStatus(
      await owner.post(`/projects/${project.id}/suppressions`, { email: 'gone@example.org' }),
      201,
    );
    expectStatus(
      await owner.delete(
        `/projects/${project.id}/suppressions/${encodeURIComponent('gone@example.org')}`,
      ),
      200,
    );
    const dkim = expectStatus(
      await owner.post(`/projects/${project.id}/dkim`, {
        domain: 'example.com',
        selector: 's1',
        algorithm: 'ed25519',
      }),
      201,
    );
    expectStatus(await owner.delete(`/dkim/${dkim.id}`), 200);
    const hook = expectStatus(
      await owner.post(`/projects/${project.id}/webhooks`, { url: 'http://127.0.0.1:9/hook' }),
      201,
    );
    expectStatus(await owner.post(`/webhooks/${hook.id}/rotate-secret`), 200);
    expectStatus(await owner.post(`/webhooks/${hook.id}/enable`), 200);
    expectStatus(await owner.post(`/webhooks/${hook.id}/test`), 200);
    expectStatus(await owner.delete(`/webhooks/${hook.id}`), 200);

    // Messages: a captured one released, a queued one cancelled, another captured one deleted.
    const send = async () => {
      const res = await post(p.sandbox, '/v1/send', { key: a.testKey, json: validMessage() });
      assert.equal(res.status, 202, res.text);
      return res.body.id as string;
    };
    const released = await send();
    assert.equal(
      expectStatus(await owner.post(`/messages/${released}/release`), 200).status,
      'queued',
    );
    assert.equal(
      expectStatus(await owner.post(`/messages/${released}/cancel`), 200).status,
      'cancelled',
    );
    expectError(await owner.post(`/messages/${released}/retry`), 409, 'conflict');
    const deleted = await send();
    expectStatus(await owner.delete(`/messages/${deleted}`), 200);
    expectError(await owner.delete(`/messages/${deleted}`), 404, 'not_found');
    const bulk = expectStatus(
      await owner.post('/messages/bulk', { action: 'cancel', ids: [await send()] }),
      200,
    );
    assert.equal(bulk.changed, 1);

    // Operators, tokens, passwords and sessions.
    const dev = expectStatus(
      await owner.post('/operators', {
        email: 'dev@example.com',
        role: 'member',
        projects: [project.id],
        password: PASSWORD,
      }),
      201,
    );
    expectError(
      await owner.post('/operators', {
        email: 'DEV@example.com',
        role: 'member',
        password: PASSWORD,
      }),
      409,
      'conflict',
    );
    expectStatus(
      await owner.patch(`/operators/${dev.id}`, { projects: [project.id, a.project.id] }),
      200,
    );
    const devClient = await ConsoleClient.signIn(p.console, 'dev@example.com', PASSWORD);
    const token = expectStatus(await devClient.post('/tokens', { name: 'script' }), 201);
    expectStatus(await devClient.withToken(token.token).get('/session'), 200);
    expectStatus(await devClient.delete(`/tokens/${token.id}`), 200);
    const next = `${PASSWORD} again`;
    expectStatus(
      await devClient.put('/session/password', { current_password: PASSWORD, new_password: next }),
      200,
    );
    expect(await devClient.delete('/session'), 204);
    expectStatus(await owner.post(`/operators/${dev.id}/reset-password`), 200);
    expectStatus(await owner.delete(`/operators/${dev.id}`), 200);
    expectStatus(await owner.delete(`/projects/${project.id}`), 200);

    const actions = new Set((await listAudit(p.ctx.store, {}, 1000)).map((r) => r.action));
    for (const action of [
      'project.create',
      'project.plan',
      'project.strategy',
      'project.pause',
      'project.resume',
      'project.delete',
      'key.create',
      'key.rotate',
      'key.revoke',
      'provider.attach',
      'provider.update',
      'provider.detach',
      'suppression.add',
      'suppression.remove',
      'dkim.add',
      'dkim.remove',
      'webhook.add',
      'webhook.rotate_secret',
      'webhook.enable',
      'webhook.test',
      'webhook.remove',
      'message.release',
      'message.cancel',
      'message.delete',
      'message.bulk_cancel',
      'operator.create',
      'operator.update',
      'session.sign_in',
      'operator_token.create',
      'operator_token.revoke',
      'operator.change_password',
      'session.sign_out',
      'operator.reset_password',
      'operator.remove',
    ]) {
      assert.ok(actions.has(action), `audit row ${action}`);
    }
    // A refused write changed nothing: no audit row for the retry that was a conflict.
    assert.equal(actions.has('message.retry'), false);
    // SQLite: and the event loop's connection still only reads (PostgreSQL has no such connection).
    if (p.running.db) assert.equal(p.running.db.pragma('query_only', { simple: true }), 1);
  });

  test('a use of a session read before it expired does not bring it back (the touch writes only over what it read)', async () => {
    const client = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
    const row = (
      await p.ctx.store.all<{ id_hash: Buffer; last_seen_at: number }>(
        'SELECT id_hash, last_seen_at FROM operator_sessions ORDER BY created_at DESC LIMIT 1',
      )
    )[0];
    // A request read the session at row.last_seen_at; meanwhile it lapsed (made so here).
    const lapsed = Date.now() - p.config.console.session_idle_seconds * 1000 - 60_000;
    await p.ctx.store.run(
      'UPDATE operator_sessions SET last_seen_at = ? WHERE id_hash = ?',
      lapsed,
      row.id_hash,
    );
    await touchOperatorSession(p.ctx.store, row.id_hash, Date.now(), row.last_seen_at);
    assert.equal((await findOperatorSession(p.ctx.store, row.id_hash))!.last_seen_at, lapsed);
    expectError(await client.get('/session'), 401, 'session_expired');
    // A touch over what it read moves it.
    const fresh = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
    const now = (
      await p.ctx.store.all<{ id_hash: Buffer; last_seen_at: number }>(
        'SELECT id_hash, last_seen_at FROM operator_sessions ORDER BY created_at DESC LIMIT 1',
      )
    )[0];
    await touchOperatorSession(p.ctx.store, now.id_hash, now.last_seen_at + 1000, now.last_seen_at);
    assert.equal(
      (await findOperatorSession(p.ctx.store, now.id_hash))!.last_seen_at,
      now.last_seen_at + 1000,
    );
    expectStatus(await fresh.get('/session'), 200);
  });

  test('a write the operator is told succeeded is flushed to disk before its answer; last-seen times are not', () => {
    assert.equal(
      operatorWriteIsDurable({
        type: 'project_create',
        row: { id: 'p.x', name: 'x', plan: 'pro', created_at: 0 },
        stamp,
      }),
      true,
    );
    assert.equal(
      operatorWriteIsDurable({
        type: 'session_start',
        id_hash: '00',
        operator_id: 'op.x',
        now: 0,
        client_ip: null,
        stamp,
      }),
      true,
    );
    assert.equal(
      operatorWriteIsDurable({ type: 'message_one', action: 'release', id: 'm.x', now: 0, stamp }),
      true,
    );
    assert.equal(
      operatorWriteIsDurable({ type: 'session_touch', id_hash: '00', now: 0, seen: 0 }),
      false,
    );
    assert.equal(operatorWriteIsDurable({ type: 'token_touch', token_id: 'ot.x', now: 0 }), false);
    assert.equal(operatorWriteIsDurable({ type: 'key_use', uses: [] }), false);
  });
});

function expect(res: { status: number; text: string }, status: number): void {
  assert.equal(res.status, status, res.text);
}
