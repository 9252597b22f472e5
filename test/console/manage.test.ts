/**
 * Managing a Postern through the console API: projects and plans, API keys (last used,
 * rotation with a grace), suppressions (search, CSV), DKIM, webhooks (test button, secret
 * rotation, delivery log), operators and the audit log, overview figures — for an owner and a
 * member, against a real server over real HTTP, every answer checked against the document.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { suppress } from '../../src/operator/suppressions.js';
import { getValue } from '../../src/store/queries.js';
import { ConsoleClient, consoleWorld, expectError, expectStatus } from '../support/console.js';
import {
  type ProjectWithKeys,
  post,
  runCli,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { waitFor } from '../support/waiting.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const T0 = Date.parse('2026-11-20T09:00:00.000Z');

describe('console management', () => {
  const clock = new ManualClock(T0);
  let p: TestPostern;
  let a: ProjectWithKeys;
  let b: ProjectWithKeys;
  let owner: ConsoleClient;
  let member: ConsoleClient;
  let memberId: string;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await WebhookReceiver.start();
    ({ p, a, b, owner, member, memberId } = await consoleWorld({
      clock,
      config: { webhooks: { allow_private_targets: true, enabled: false } },
    }));
  });
  after(async () => {
    await p?.close();
    await receiver?.close();
  });

  test('projects: an owner creates, plans, routes, pauses, resumes and deletes; a member sees only their own', async () => {
    const made = expectStatus(await owner.post('/projects', { name: 'gamma', plan: 'free' }), 201);
    assert.deepEqual(made, {
      id: made.id,
      name: 'gamma',
      plan: 'free',
      paused: false,
      strategy: 'fallback',
      created_at: new Date(T0).toISOString(),
    });
    expectError(
      await owner.post('/projects', { name: 'delta', plan: 'platinum' }),
      422,
      'plan:invalid_value',
    );
    assert.equal(
      expectStatus(await owner.put(`/projects/${made.id}/plan`, { plan: 'pro' }), 200).plan,
      'pro',
    );
    assert.equal(
      expectStatus(
        await owner.put(`/projects/${made.id}/strategy`, { strategy: 'round-robin' }),
        200,
      ).strategy,
      'round-robin',
    );
    expectError(
      await owner.put(`/projects/${made.id}/strategy`, { strategy: 'chaos' }),
      422,
      'strategy:invalid_value',
    );
    assert.equal(expectStatus(await owner.post(`/projects/${made.id}/pause`), 200).paused, true);
    const resumed = expectStatus(await owner.post(`/projects/${made.id}/resume`), 200);
    assert.deepEqual([resumed.paused, resumed.released], [false, 0]);
    const shown = expectStatus(await owner.get(`/projects/${made.id}`), 200);
    assert.equal(shown.limits.monthly_messages, 50000);
    assert.deepEqual(shown.usage.day, { period: '2026-11-20', messages: 0 });
    assert.deepEqual(expectStatus(await owner.delete(`/projects/${made.id}`), 200), {
      id: made.id,
      deleted: true,
    });
    expectError(await owner.get(`/projects/${made.id}`), 404, 'not_found');

    const mine = expectStatus(await member.get('/projects'), 200).projects.map((x: any) => x.id);
    assert.deepEqual(mine, [a.project.id]);
    expectStatus(await member.get(`/projects/${a.project.id}`), 200);
    expectError(await member.get(`/projects/${b.project.id}`), 404, 'not_found');
    expectError(await member.post('/projects', { name: 'not mine' }), 403, 'forbidden');
  });

  test('keys: a member lists, creates (shown once), rotates (old one expires after the grace) and revokes keys of their project, with when each was last used', async () => {
    const created = expectStatus(
      await member.post(`/projects/${a.project.id}/keys`, { mode: 'live' }),
      201,
    );
    assert.match(created.key, /^ps_live_[A-Za-z0-9]{40}$/);
    const listed = expectStatus(await member.get(`/projects/${a.project.id}/keys`), 200).keys;
    assert.ok(!JSON.stringify(listed).includes(created.key));
    assert.equal(listed.find((k: any) => k.id === created.id).last_used_at, null);

    // One accepted request: "last used" is that instant.
    const res = await post(p.production, '/v1/send', { key: created.key, json: validMessage() });
    assert.equal(res.status, 202, res.text);
    const used = expectStatus(await member.get(`/projects/${a.project.id}/keys`), 200).keys.find(
      (k: any) => k.id === created.id,
    );
    assert.equal(used.last_used_at, new Date(T0).toISOString());

    const rotated = expectStatus(
      await member.post(`/keys/${created.id}/rotate`, { grace_seconds: 3600 }),
      201,
    );
    assert.match(rotated.key.key, /^ps_live_/);
    assert.notEqual(rotated.key.id, created.id);
    assert.deepEqual(
      [rotated.previous.id, rotated.previous.state, rotated.previous.expires_at],
      [created.id, 'active', new Date(T0 + 3600_000).toISOString()],
    );
    assert.equal(
      (await post(p.production, '/v1/send', { key: created.key, json: validMessage() })).status,
      202,
    );
    clock.advance(3600_000);
    const expired = await post(p.production, '/v1/send', {
      key: created.key,
      json: validMessage(),
    });
    assert.deepEqual([expired.status, expired.body.error.code], [401, 'key_expired']);
    assert.equal(
      (await post(p.production, '/v1/send', { key: rotated.key.key, json: validMessage() })).status,
      202,
    );
    expectError(await member.post(`/keys/${created.id}/rotate`, {}), 409, 'conflict');
    expectError(
      await member.post(`/keys/${rotated.key.id}/rotate`, { grace_seconds: -1 }),
      422,
      'grace_seconds:out_of_range',
    );

    const revoked = expectStatus(await member.post(`/keys/${rotated.key.id}/revoke`), 200);
    assert.equal(revoked.state, 'revoked');
    assert.equal(
      (await post(p.production, '/v1/send', { key: rotated.key.key, json: validMessage() })).body
        .error.code,
      'invalid_api_key',
    );
    // Another project's keys: not found, for a member.
    const bKeys = expectStatus(await owner.get(`/projects/${b.project.id}/keys`), 200).keys;
    expectError(await member.post(`/keys/${bKeys[0].id}/revoke`), 404, 'not_found');
    expectError(await member.get(`/projects/${b.project.id}/keys`), 404, 'not_found');
    expectError(
      await member.post(`/projects/${b.project.id}/keys`, { mode: 'test' }),
      404,
      'not_found',
    );
  });

  test('suppressions: add, search, page, remove, and export as CSV', async () => {
    for (const email of ['zed@example.org', 'amy@example.org', 'bob@example.net'])
      expectStatus(
        await member.post(`/projects/${a.project.id}/suppressions`, { email, reason: 'manual' }),
        201,
      );
    await suppress(p.ctx, a.project.id, 'carl@example.org', 'hard_bounce: 550 "no, such user"');
    expectError(
      await member.post(`/projects/${a.project.id}/suppressions`, { email: 'not an address' }),
      422,
      'email:invalid_value',
    );
    const first = expectStatus(
      await member.get(`/projects/${a.project.id}/suppressions?limit=2`),
      200,
    );
    assert.deepEqual(
      first.suppressions.map((s: any) => s.email),
      ['amy@example.org', 'bob@example.net'],
    );
    const second = expectStatus(
      await member.get(
        `/projects/${a.project.id}/suppressions?limit=2&cursor=${first.next_cursor}`,
      ),
      200,
    );
    assert.deepEqual(
      second.suppressions.map((s: any) => s.email),
      ['carl@example.org', 'zed@example.org'],
    );
    assert.equal(second.next_cursor, null);
    const found = expectStatus(
      await member.get(`/projects/${a.project.id}/suppressions?q=example.net`),
      200,
    );
    assert.deepEqual(
      found.suppressions.map((s: any) => s.email),
      ['bob@example.net'],
    );
    const csv = await member.get(`/projects/${a.project.id}/suppressions.csv`, { unchecked: true });
    assert.equal(csv.status, 200);
    assert.equal(csv.headers.get('content-type'), 'text/csv; charset=utf-8');
    const stamp = new Date(clock.now()).toISOString();
    assert.equal(
      csv.text,
      `email,reason,created_at\r\namy@example.org,manual,${stamp}\r\nbob@example.net,manual,${stamp}\r\ncarl@example.org,"hard_bounce: 550 ""no, such user""",${stamp}\r\nzed@example.org,manual,${stamp}\r\n`,
    );
    assert.deepEqual(
      expectStatus(
        await member.delete(
          `/projects/${a.project.id}/suppressions/${encodeURIComponent('zed@example.org')}`,
        ),
        200,
      ),
      {
        project_id: a.project.id,
        email: 'zed@example.org',
        removed: true,
      },
    );
    expectError(
      await member.delete(
        `/projects/${a.project.id}/suppressions/${encodeURIComponent('zed@example.org')}`,
      ),
      404,
      'not_found',
    );
    expectError(await member.get(`/projects/${b.project.id}/suppressions`), 404, 'not_found');
  });

  test('DKIM: a key generated or imported as PEM, listed with its DNS record, retired', async () => {
    const generated = expectStatus(
      await member.post(`/projects/${a.project.id}/dkim`, {
        domain: 'Example.COM',
        selector: 's1',
        algorithm: 'ed25519',
      }),
      201,
    );
    assert.deepEqual(
      [generated.domain, generated.algorithm, generated.dns_name],
      ['example.com', 'ed25519-sha256', 's1._domainkey.example.com'],
    );
    assert.match(generated.dns_value, /^v=DKIM1; k=ed25519; p=/);
    const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    const imported = expectStatus(
      await member.post(`/projects/${a.project.id}/dkim`, {
        domain: 'mail.example.com',
        selector: 's2',
        private_key: pem,
      }),
      201,
    );
    assert.equal(imported.algorithm, 'rsa-sha256');
    assert.ok(!JSON.stringify(imported).includes('PRIVATE KEY'));
    expectError(
      await member.post(`/projects/${a.project.id}/dkim`, {
        domain: 'example.org',
        selector: 's3',
        private_key: 'not a pem',
      }),
      422,
      'private_key:invalid_value',
    );
    const listed = expectStatus(await member.get(`/projects/${a.project.id}/dkim`), 200);
    assert.deepEqual(listed.keys.map((k: any) => k.id).sort(), [generated.id, imported.id].sort());
    assert.deepEqual(expectStatus(await member.delete(`/dkim/${generated.id}`), 200), {
      id: generated.id,
      removed: true,
    });
    expectError(await member.delete(`/dkim/${generated.id}`), 404, 'not_found');
    const other = expectStatus(
      await owner.post(`/projects/${b.project.id}/dkim`, {
        domain: 'beta.example',
        selector: 's1',
      }),
      201,
    );
    expectError(await member.delete(`/dkim/${other.id}`), 404, 'not_found');
  });

  test('webhooks: add (secret once), test button, delivery log, secret rotation, enable, remove', async () => {
    const added = expectStatus(
      await member.post(`/projects/${a.project.id}/webhooks`, {
        url: receiver.url('/hook'),
        events: ['mail.sent', 'mail.bounced'],
      }),
      201,
    );
    assert.match(added.secret, /^whsec_/);
    const listed = expectStatus(await member.get(`/projects/${a.project.id}/webhooks`), 200);
    assert.ok(!JSON.stringify(listed).includes(added.secret));
    assert.deepEqual(
      listed.webhooks.map((w: any) => [w.id, w.events]),
      [[added.id, ['mail.sent', 'mail.bounced']]],
    );
    expectError(
      await member.post(`/projects/${a.project.id}/webhooks`, { url: 'ftp://example.com/' }),
      422,
      'url:invalid_value',
    );

    const tested = expectStatus(await member.post(`/webhooks/${added.id}/test`), 200);
    assert.deepEqual(
      [tested.type, tested.delivered, tested.status_code, tested.error],
      ['webhook.test', true, 200, null],
    );
    await waitFor(() => receiver.received.length === 1);
    assert.equal(receiver.received[0].headers['x-service-event'], 'webhook.test');
    receiver.respond = () => ({ status: 503, body: 'down for maintenance' });
    const failed = expectStatus(await member.post(`/webhooks/${added.id}/test`), 200);
    assert.deepEqual([failed.delivered, failed.status_code], [false, 503]);
    receiver.respond = () => ({ status: 200 });

    const log = expectStatus(await member.get(`/webhooks/${added.id}/attempts`), 200);
    assert.deepEqual(
      log.attempts.map((x: any) => [
        x.delivery_id,
        x.type,
        x.attempt,
        x.delivered,
        x.status_code,
        x.error,
      ]),
      [
        [failed.id, 'webhook.test', 1, false, 503, 'HTTP 503: down for maintenance'],
        [tested.id, 'webhook.test', 1, true, 200, null],
      ],
    );
    for (const x of log.attempts) assert.ok(Number.isInteger(x.duration_ms) && x.duration_ms >= 0);
    const page = expectStatus(await member.get(`/webhooks/${added.id}/attempts?limit=1`), 200);
    assert.deepEqual(
      expectStatus(
        await member.get(`/webhooks/${added.id}/attempts?limit=1&cursor=${page.next_cursor}`),
        200,
      ).attempts.map((x: any) => x.delivery_id),
      [tested.id],
    );

    const rotated = expectStatus(await member.post(`/webhooks/${added.id}/rotate-secret`), 200);
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.secret, added.secret);
    assert.equal(
      rotated.previous_secret_expires_at,
      new Date(clock.now() + 86_400_000).toISOString(),
    );
    const enabled = expectStatus(await member.post(`/webhooks/${added.id}/enable`), 200);
    assert.deepEqual([enabled.state, enabled.resumed_deliveries], ['enabled', 0]);
    const removed = expectStatus(await member.delete(`/webhooks/${added.id}`), 200);
    assert.deepEqual(removed, { id: added.id, removed: true, cancelled_deliveries: 0 });
    const other = expectStatus(
      await owner.post(`/projects/${b.project.id}/webhooks`, { url: receiver.url('/b') }),
      201,
    );
    for (const suffix of ['/test', '/enable', '/rotate-secret'])
      expectError(await member.post(`/webhooks/${other.id}${suffix}`), 404, 'not_found');
    expectError(await member.get(`/webhooks/${other.id}/attempts`), 404, 'not_found');
  });

  test('operators: an owner creates (one-time password), changes, resets and removes operators; the last owner stays', async () => {
    const created = expectStatus(
      await owner.post('/operators', {
        email: 'dev@example.com',
        role: 'member',
        projects: [b.project.id],
      }),
      201,
    );
    assert.match(created.password, /^[A-Za-z0-9]{20}$/);
    const dev = await ConsoleClient.signIn(p.console, 'dev@example.com', created.password);
    // The generated password is changed first; then the member sees their project.
    expectError(await dev.get('/projects'), 403, 'password_change_required');
    assert.equal(
      (
        await dev.put('/session/password', {
          current_password: created.password,
          new_password: 'dev chosen password',
        })
      ).status,
      200,
    );
    assert.deepEqual(
      expectStatus(await dev.get('/projects'), 200).projects.map((x: any) => x.id),
      [b.project.id],
    );
    expectError(
      await owner.post('/operators', { email: 'DEV@example.com', role: 'member' }),
      409,
      'conflict',
    );
    expectError(
      await owner.post('/operators', {
        email: 'x@example.com',
        role: 'owner',
        projects: [a.project.id],
      }),
      422,
      'projects:invalid_value',
    );
    const list = expectStatus(await owner.get('/operators'), 200);
    assert.ok(!JSON.stringify(list).includes(created.password));
    assert.ok(!JSON.stringify(list).includes('scrypt'));

    const moved = expectStatus(
      await owner.patch(`/operators/${created.id}`, { projects: [a.project.id, b.project.id] }),
      200,
    );
    assert.deepEqual(moved.projects, [a.project.id, b.project.id].sort());
    const reset = expectStatus(await owner.post(`/operators/${created.id}/reset-password`), 200);
    assert.match(reset.password, /^[A-Za-z0-9]{20}$/);
    // Reset signs the operator out everywhere; the old password no longer works, the new one does.
    expectError(await dev.get('/session'), 401, 'unauthenticated');
    expectError(
      await new ConsoleClient(p.console).post('/session', {
        email: 'dev@example.com',
        password: 'dev chosen password',
      }),
      401,
      'invalid_credentials',
    );
    const again = await ConsoleClient.signIn(p.console, 'dev@example.com', reset.password);
    assert.deepEqual(expectStatus(await owner.delete(`/operators/${created.id}`), 200), {
      id: created.id,
      removed: true,
    });
    expectError(await again.get('/session'), 401, 'unauthenticated');

    const ownerId = expectStatus(await owner.get('/session'), 200).operator.id;
    expectError(await owner.patch(`/operators/${ownerId}`, { role: 'member' }), 409, 'conflict');
    expectError(await owner.delete(`/operators/${ownerId}`), 409, 'conflict');
    expectError(await member.patch(`/operators/${memberId}`, { role: 'owner' }), 403, 'forbidden');
  });

  test('the audit log lists every state change, newest first, with who, from where and on what; CLI actions as cli', async () => {
    const cli = await runCli(['project', 'create', '--name', 'from the cli', '--json'], {
      POSTERN_STATE_DIR: p.stateDir,
      POSTERN_CLOCK_OFFSET_MS: String(T0 - Date.now()),
    });
    assert.equal(cli.code, 0, cli.stderr);
    const log = expectStatus(await owner.get('/audit?limit=500'), 200).entries;
    assert.deepEqual(
      log.map((e: any) => e.seq),
      [...log.map((e: any) => e.seq)].sort((x: number, y: number) => y - x),
    );
    const newest = log[0];
    assert.deepEqual(
      [newest.actor, newest.actor_email, newest.action, newest.target, newest.client_ip],
      ['cli', null, 'project.create', cli.json.id, null],
    );
    const actions = new Set(log.map((e: any) => e.action));
    for (const action of [
      'session.sign_in',
      'project.create',
      'project.plan',
      'project.strategy',
      'project.pause',
      'project.resume',
      'project.delete',
      'key.create',
      'key.rotate',
      'key.revoke',
      'suppression.add',
      'suppression.remove',
      'dkim.add',
      'dkim.remove',
      'webhook.add',
      'webhook.test',
      'webhook.rotate_secret',
      'webhook.enable',
      'webhook.remove',
      'operator.create',
      'operator.update',
      'operator.reset_password',
      'operator.remove',
    ]) {
      assert.ok(actions.has(action), `${action} is audited`);
    }
    const byMember = log.find((e: any) => e.action === 'key.rotate');
    assert.deepEqual(
      [byMember.actor, byMember.actor_email, byMember.client_ip],
      [memberId, 'member@example.com', '127.0.0.1'],
    );
    const onlyRotations = expectStatus(await owner.get('/audit?action=key.rotate'), 200).entries;
    assert.deepEqual(
      onlyRotations.map((e: any) => e.action),
      ['key.rotate'],
    );
    const byActor = expectStatus(await owner.get(`/audit?actor=${memberId}&limit=1`), 200);
    assert.equal(byActor.entries[0].actor, memberId);
    assert.notEqual(byActor.next_cursor, null);
    expectError(await member.get('/audit'), 403, 'forbidden');
  });

  test('overview: hourly counts for 24 h, queue by status, oldest waiting, providers, webhooks in trouble and storage for an owner; a member’s figures cover their projects only', async () => {
    await post(p.production, '/v1/send', {
      key: b.liveKey,
      json: validMessage({ subject: 'for the overview' }),
    });
    const figures = expectStatus(await owner.get('/overview'), 200);
    assert.equal(figures.hourly.length, 24);
    assert.equal(
      figures.hourly[23].hour,
      new Date(Math.floor(clock.now() / 3600_000) * 3600_000).toISOString(),
    );
    const accepted: number = figures.hourly.reduce((n: number, h: any) => n + h.counts.accepted, 0);
    assert.equal(
      accepted,
      await getValue<number>(
        p.ctx.store,
        "SELECT COUNT(*) FROM events WHERE type = 'mail.accepted'",
      ),
    );
    assert.ok(accepted > 0);
    assert.equal(
      figures.queue.queued,
      await getValue<number>(p.ctx.store, "SELECT COUNT(*) FROM messages WHERE status = 'queued'"),
    );
    assert.ok(figures.oldest_waiting.id.startsWith('m.'));
    assert.equal(figures.oldest_waiting.age_seconds, Math.round((clock.now() - T0) / 1000));
    assert.deepEqual(
      figures.providers
        .map((x: any) => [
          x.project_id,
          x.slug,
          x.handoffs_last_hour,
          x.failures_last_hour,
          x.throttled_until,
        ])
        .sort(),
      [
        [a.project.id, 'smtp', 0, 0, null],
        [b.project.id, 'smtp', 0, 0, null],
      ].sort(),
    );
    assert.ok(figures.storage.spool_bytes > 0);
    assert.ok(figures.storage.disk_free_bytes > 0);

    const mine = expectStatus(await member.get('/overview'), 200);
    assert.equal(mine.providers, null);
    assert.equal(mine.storage, null);
    const memberAccepted = mine.hourly.reduce((n: number, h: any) => n + h.counts.accepted, 0);
    const bAccepted = expectStatus(
      await owner.get(`/overview?project=${b.project.id}`),
      200,
    ).hourly.reduce((n: number, h: any) => n + h.counts.accepted, 0);
    assert.equal(memberAccepted + bAccepted, accepted);
    expectError(await member.get(`/overview?project=${b.project.id}`), 404, 'not_found');

    // An endpoint whose attempts fail shows as failing.
    const hook = expectStatus(
      await owner.post(`/projects/${b.project.id}/webhooks`, { url: receiver.url('/down') }),
      201,
    );
    receiver.respond = () => ({ status: 500 });
    await owner.post(`/webhooks/${hook.id}/test`);
    receiver.respond = () => ({ status: 200 });
    const { markEndpointFailure } = await import('../../src/store/webhookEndpoints.js');
    await markEndpointFailure(p.ctx.store, hook.id, clock.now(), 86_400_000, () => 'failing');
    const troubled = expectStatus(await owner.get('/overview'), 200).webhooks;
    assert.deepEqual(
      troubled.map((w: any) => [w.id, w.state]),
      [[hook.id, 'failing']],
    );
    assert.deepEqual(expectStatus(await member.get('/overview'), 200).webhooks, []);
  });
  test('keys have a name: given at creation (422 past 100 characters), listed, kept by a rotation, in the audit log; the CLI takes --name', async () => {
    const named = expectStatus(
      await member.post(`/projects/${a.project.id}/keys`, {
        mode: 'live',
        name: '  billing worker ',
      }),
      201,
    );
    assert.equal(named.name, 'billing worker');
    expectError(
      await member.post(`/projects/${a.project.id}/keys`, { mode: 'live', name: 'x'.repeat(101) }),
      422,
      'name:too_long',
    );
    const listed = expectStatus(await member.get(`/projects/${a.project.id}/keys`), 200).keys;
    assert.equal(listed.find((k: any) => k.id === named.id).name, 'billing worker');
    // Keys made before names have an empty one.
    assert.ok(listed.some((k: any) => k.id !== named.id && k.name === ''));
    const rotated = expectStatus(
      await member.post(`/keys/${named.id}/rotate`, { grace_seconds: 0 }),
      201,
    );
    assert.equal(rotated.key.name, 'billing worker', 'the new key does the same job');
    const created = expectStatus(await owner.get('/audit?action=key.create&limit=1'), 200)
      .entries[0];
    assert.equal(created.details.name, 'billing worker');
    const cli = await runCli(
      [
        'key',
        'create',
        '--project',
        a.project.id,
        '--mode',
        'test',
        '--name',
        'staging site',
        '--json',
      ],
      { POSTERN_STATE_DIR: p.stateDir, POSTERN_CLOCK_OFFSET_MS: String(clock.now() - Date.now()) },
    );
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(cli.json.name, 'staging site');
  });

  test('plans: every operator can list the configured plans with their limits, the default one marked; a project moves to one of them', async () => {
    const plans = expectStatus(await member.get('/plans'), 200).plans;
    assert.deepEqual(
      plans.map((x: any) => [x.name, x.default, x.limits.monthly_messages, x.limits.monthly_bytes]),
      [
        ['free', true, 3000, 1073741824],
        ['pro', false, 50000, 53687091200],
      ],
    );
    const made = expectStatus(
      await owner.post('/projects', { name: 'planned', plan: plans[1].name }),
      201,
    );
    assert.equal(
      expectStatus(await owner.put(`/projects/${made.id}/plan`, { plan: 'free' }), 200).plan,
      'free',
    );
    expectStatus(await owner.delete(`/projects/${made.id}`), 200);
  });

  test("the audit log filters by the operator's email (any case), alone or with an action; the CLI takes --actor-email", async () => {
    expectStatus(
      await member.post(`/projects/${a.project.id}/suppressions`, {
        email: 'audit-by-email@example.org',
      }),
      201,
    );
    const byEmail = expectStatus(
      await owner.get('/audit?actor_email=MEMBER@example.com&limit=500'),
      200,
    ).entries;
    assert.ok(byEmail.length > 1);
    assert.deepEqual([...new Set(byEmail.map((e: any) => e.actor_email))], ['member@example.com']);
    const adds = expectStatus(
      await owner.get('/audit?actor_email=member@example.com&action=suppression.add&limit=1'),
      200,
    ).entries;
    assert.deepEqual(
      adds.map((e: any) => [e.action, e.details.email]),
      [['suppression.add', 'audit-by-email@example.org']],
    );
    assert.deepEqual(
      expectStatus(await owner.get('/audit?actor_email=nobody@example.com'), 200).entries,
      [],
    );
    const cli = await runCli(
      ['audit', 'list', '--actor-email', 'Member@Example.com', '--limit', '1', '--json'],
      { POSTERN_STATE_DIR: p.stateDir },
    );
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(cli.json.entries[0].actor_email, 'member@example.com');
  });

  test('a refused webhook URL is explained in words, not a command-line flag', async () => {
    for (const url of ['ftp://example.com/hook', 'https://user:pw@example.com/hook']) {
      const err = expectError(
        await member.post(`/projects/${a.project.id}/webhooks`, { url }),
        422,
        'url:invalid_value',
      );
      assert.match(err.message, /^This URL cannot receive webhooks: .+\.$/);
      assert.doesNotMatch(err.message, /--url/);
    }
  });

  test("webhook delivery log: newest first by when each attempt started; each attempt keeps the receiver's answer, each delivery the body it sent; a delivered or failed delivery is redelivered on demand (a pending one is refused)", async () => {
    const hook = expectStatus(
      await member.post(`/projects/${a.project.id}/webhooks`, { url: receiver.url('/logged') }),
      201,
    );
    receiver.respond = () => ({ status: 200, body: '{"thanks":"got it"}' });
    const tested = expectStatus(await member.post(`/webhooks/${hook.id}/test`), 200);
    receiver.respond = () => ({ status: 500, body: 'database is down' });
    const failed = expectStatus(await member.post(`/webhooks/${hook.id}/test`), 200);
    receiver.respond = () => ({ status: 200 });
    const log = expectStatus(await member.get(`/webhooks/${hook.id}/attempts`), 200).attempts;
    assert.deepEqual(
      log.map((x: any) => [x.delivery_id, x.answer]),
      [
        [failed.id, 'database is down'],
        [tested.id, '{"thanks":"got it"}'],
      ],
    );

    // Attempts are written as they finish: a slow one started first is written after a quick one started later.
    const { insertWebhookAttempt } = await import('../../src/store/webhookAttempts.js');
    const at = clock.now();
    const row = (delivery: string, started: number) => ({
      delivery_id: delivery,
      endpoint_id: hook.id,
      type: 'mail.sent',
      attempt: 1,
      attempted_at: started,
      ok: 1,
      status_code: 200,
      duration_ms: 5,
      error: null,
    });
    await insertWebhookAttempt(p.ctx.store, row('we.0slowstartedfirst0000000', at + 10_000));
    await insertWebhookAttempt(p.ctx.store, row('we.0quickstartedlater00000', at + 20_000));
    const ordered = expectStatus(await member.get(`/webhooks/${hook.id}/attempts?limit=2`), 200);
    assert.deepEqual(
      ordered.attempts.map((x: any) => x.delivery_id),
      ['we.0quickstartedlater00000', 'we.0slowstartedfirst0000000'],
    );
    const rest = expectStatus(
      await member.get(`/webhooks/${hook.id}/attempts?cursor=${ordered.next_cursor}`),
      200,
    ).attempts.map((x: any) => x.delivery_id);
    assert.deepEqual(
      rest,
      [failed.id, tested.id],
      'the next page goes on in time order, nothing repeated or skipped',
    );

    // A delivery: the body it sent, byte for byte as the receiver got it, and its attempts.
    const shown = expectStatus(
      await member.get(`/webhooks/${hook.id}/deliveries/${tested.id}`),
      200,
    );
    const got = receiver.received.find((r) => r.headers['x-service-delivery'] === tested.id)!;
    assert.equal(shown.request_body, got.raw.toString('utf8'));
    assert.deepEqual(
      [shown.status, shown.attempts.map((x: any) => [x.attempt, x.status_code, x.answer])],
      ['delivered', [[1, 200, '{"thanks":"got it"}']]],
    );

    // Redeliver the failed one, now that the receiver is back: the same id and body, attempt 2, delivered.
    const before = receiver.received.length;
    const again = expectStatus(
      await member.post(`/webhooks/${hook.id}/deliveries/${failed.id}/redeliver`),
      200,
    );
    assert.deepEqual(
      [again.id, again.attempt, again.delivered, again.status_code],
      [failed.id, 2, true, 200],
    );
    assert.equal(receiver.received.length, before + 1);
    const resent = receiver.received[before];
    assert.equal(resent.headers['x-service-delivery'], failed.id);
    assert.equal(
      resent.raw.toString('utf8'),
      receiver.received
        .find((r) => r.headers['x-service-delivery'] === failed.id)!
        .raw.toString('utf8'),
    );
    const now = expectStatus(await member.get(`/webhooks/${hook.id}/deliveries/${failed.id}`), 200);
    assert.deepEqual(
      [now.status, now.attempts.map((x: any) => [x.attempt, x.delivered])],
      [
        'delivered',
        [
          [1, false],
          [2, true],
        ],
      ],
    );
    const audited = expectStatus(await owner.get('/audit?action=webhook.redeliver'), 200).entries;
    assert.deepEqual(
      audited.map((e: any) => [e.target, e.details.delivery, e.details.attempt]),
      [[hook.id, failed.id, 2]],
    );

    // An outbox delivery still pending is the dispatcher's: refused. Its body is built again from its event.
    const { insertWebhookDelivery } = await import('../../src/store/webhookDeliveries.js');
    const event = (await p.ctx.store.get<{ seq: number }>(
      "SELECT seq FROM events WHERE project_id = ? AND type = 'mail.accepted' ORDER BY seq DESC LIMIT 1",
      a.project.id,
    ))!;
    const pendingId = 'we.0pendingdelivery0000000';
    await insertWebhookDelivery(p.ctx.store, {
      id: pendingId,
      endpoint_id: hook.id,
      event_seq: event.seq,
      type: 'mail.accepted',
      status: 'pending',
      attempts: 0,
      next_attempt_at: at + 3600_000,
      created_at: at,
      last_attempt_at: null,
      last_status: null,
      last_error: null,
      completed_at: null,
    });
    expectError(
      await member.post(`/webhooks/${hook.id}/deliveries/${pendingId}/redeliver`),
      409,
      'conflict',
    );
    const pending = expectStatus(
      await member.get(`/webhooks/${hook.id}/deliveries/${pendingId}`),
      200,
    );
    assert.deepEqual(
      [JSON.parse(pending.request_body).id, JSON.parse(pending.request_body).type],
      [pendingId, 'mail.accepted'],
    );
    await p.ctx.store.run(
      "UPDATE webhook_deliveries SET status = 'failed' WHERE id = ?",
      pendingId,
    );
    const sent = expectStatus(
      await member.post(`/webhooks/${hook.id}/deliveries/${pendingId}/redeliver`),
      200,
    );
    assert.deepEqual([sent.attempt, sent.delivered], [1, true]);
    assert.equal(
      receiver.received[receiver.received.length - 1].raw.toString('utf8'),
      pending.request_body,
    );

    // Another project's endpoint, or a delivery of another endpoint: not found.
    const other = expectStatus(
      await owner.post(`/projects/${b.project.id}/webhooks`, { url: receiver.url('/b-log') }),
      201,
    );
    expectError(
      await member.get(`/webhooks/${other.id}/deliveries/${tested.id}`),
      404,
      'not_found',
    );
    expectError(await owner.get(`/webhooks/${other.id}/deliveries/${tested.id}`), 404, 'not_found');
    expectError(
      await member.post(`/webhooks/${other.id}/deliveries/${tested.id}/redeliver`),
      404,
      'not_found',
    );
    // The CLI shows and redelivers too.
    const cli = await runCli(['webhook', 'delivery', hook.id, tested.id, '--json'], {
      POSTERN_STATE_DIR: p.stateDir,
    });
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(cli.json.request_body, shown.request_body);
  });

  test('overview: hand-offs that failed for now count per hour as deferred (where the providers were failing), for the projects whose accounts they went to', async () => {
    const account = (await p.ctx.store.get<{ id: string }>(
      'SELECT id FROM provider_accounts WHERE project_id = ? AND detached_at IS NULL',
      a.project.id,
    ))!;
    const t = clock.now() - 60_000;
    for (const outcome of ['temporary', 'temporary', 'temporary', 'account', 'permanent', 'sent']) {
      await p.ctx.store.run(
        'INSERT INTO attempts (message_id, provider_account_id, provider_slug, started_at, finished_at, outcome, reply) VALUES (?, ?, ?, ?, ?, ?, ?)',
        'm.0deferred000000000000000000',
        account.id,
        'smtp',
        t - 100,
        t,
        outcome,
        outcome === 'sent' ? '250 ok' : '451 4.3.0 try later',
      );
    }
    const sum = (o: any, key: string) =>
      o.hourly.reduce((n: number, h: any) => n + h.counts[key], 0);
    const figures = expectStatus(await owner.get('/overview'), 200);
    assert.equal(sum(figures, 'deferred'), 4);
    const health = figures.providers.find((x: any) => x.id === account.id);
    assert.deepEqual(
      [health.handoffs_last_hour, health.failures_last_hour, health.last_error],
      [6, 5, '451 4.3.0 try later'],
    );
    assert.equal(sum(expectStatus(await member.get('/overview'), 200), 'deferred'), 4);
    assert.equal(
      sum(expectStatus(await owner.get(`/overview?project=${b.project.id}`), 200), 'deferred'),
      0,
    );
  });
});
