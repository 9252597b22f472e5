import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { tempDirs } from '../support/hooks.js';
import {
  type CliResult,
  post,
  runCli,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { withClosedIndex } from '../support/processes.js';
import { storedMimeOf } from '../support/storedMime.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const KEY = /^ps_(live|test)_[A-Za-z0-9]{40}$/;

/** A new state dir; every one this file creates is removed at the end. */
const freshStateDir = tempDirs('postern-cli-');

/** The whole of stdout is exactly one JSON object followed by a newline. */
function oneJsonObject(r: CliResult): any {
  assert.ok(
    r.stdout.endsWith('\n'),
    `stdout should end with a newline: ${JSON.stringify(r.stdout)}`,
  );
  assert.equal(
    r.stdout.slice(0, -1).includes('\n'),
    false,
    `stdout should be one line: ${r.stdout}`,
  );
  const value: unknown = JSON.parse(r.stdout);
  assert.equal(typeof value, 'object');
  assert.notEqual(value, null);
  assert.equal(Array.isArray(value), false);
  assert.deepEqual(r.json, value);
  return value;
}

/** Runs a command with --json against a state dir; it must succeed with one JSON object. */
async function ok(stateDir: string, args: string[]): Promise<any> {
  const r = await runCli([...args, '--json'], { POSTERN_STATE_DIR: stateDir });
  assert.equal(r.code, 0, `postern ${args.join(' ')} exited ${r.code}: ${r.stdout}${r.stderr}`);
  return oneJsonObject(r);
}

/** Runs a command with --json that must be refused with `exit` and an error object on stdout. */
async function refused(
  stateDir: string,
  args: string[],
  exit: number,
  code: string,
): Promise<{ code: string; message: string }> {
  const r = await runCli([...args, '--json'], { POSTERN_STATE_DIR: stateDir });
  assert.equal(
    r.code,
    exit,
    `postern ${args.join(' ')} should exit ${exit}: ${r.stdout}${r.stderr}`,
  );
  const body = oneJsonObject(r);
  assert.deepEqual(body, { error: { code, message: body.error.message } });
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  return body.error;
}

describe('postern project', () => {
  const dir = freshStateDir();

  test('project create prints the new project with plan free by default', async () => {
    const p = await ok(dir, ['project', 'create', '--name', 'Acme Mail']);
    assert.match(p.id, /^p\.[0-9a-z]{20}$/);
    assert.match(p.created_at, ISO);
    assert.deepEqual(p, {
      id: p.id,
      name: 'Acme Mail',
      plan: 'free',
      paused: false,
      strategy: 'fallback',
      created_at: p.created_at,
    });
  });

  test('project create --plan pro creates a pro project', async () => {
    const p = await ok(dir, ['project', 'create', '--name', 'Big', '--plan', 'pro']);
    assert.match(p.id, /^p\./);
    assert.equal(p.plan, 'pro');
  });

  test('pause, resume, plan and delete each print one JSON object and change the project', async () => {
    const p = await ok(dir, ['project', 'create', '--name', 'lifecycle']);
    const paused = await ok(dir, ['project', 'pause', p.id]);
    assert.deepEqual(paused, { ...p, paused: true });
    const resumed = await ok(dir, ['project', 'resume', p.id]);
    assert.deepEqual(resumed, { ...p, paused: false, released: 0 });
    const planned = await ok(dir, ['project', 'plan', p.id, '--plan', 'pro']);
    assert.deepEqual(planned, { ...p, plan: 'pro' });
    const deleted = await ok(dir, ['project', 'delete', p.id]);
    assert.deepEqual(deleted, { id: p.id, deleted: true });
    const after = await refused(dir, ['project', 'pause', p.id], 1, 'not_found');
    assert.ok(after.message.includes(p.id));
  });

  test('project list and show print the projects, and show adds the plan limits and usage', async () => {
    const p = await ok(dir, ['project', 'create', '--name', 'listed']);
    const list = await ok(dir, ['project', 'list']);
    assert.ok(list.projects.some((x: { id: string }) => x.id === p.id));
    const shown = await ok(dir, ['project', 'show', p.id]);
    assert.deepEqual(shown.limits, {
      monthly_messages: 3000,
      overage: false,
      daily_messages: 100,
      monthly_bytes: 1073741824,
      bytes_grace_percent: 0,
      sender_domains: 1,
    });
    assert.deepEqual(shown.usage.month.messages, 0);
    assert.deepEqual(shown.usage.sender_domains, []);
  });

  test('strategy set changes the project default routing strategy; an unknown one is refused', async () => {
    const p = await ok(dir, ['project', 'create', '--name', 'routing']);
    for (const strategy of ['round-robin', 'random', 'free-first', 'fallback']) {
      const changed = await ok(dir, ['strategy', 'set', '--project', p.id, '--strategy', strategy]);
      assert.deepEqual(changed, { ...p, strategy });
    }
    await refused(
      dir,
      ['strategy', 'set', '--project', p.id, '--strategy', 'cheapest'],
      1,
      'invalid_argument',
    );
    await refused(
      dir,
      ['strategy', 'set', '--project', 'p.missing', '--strategy', 'random'],
      1,
      'not_found',
    );
  });

  test('an unknown plan or an empty name is refused with exit 1', async () => {
    const p = await ok(dir, ['project', 'create', '--name', 'plans']);
    await Promise.all([
      refused(
        dir,
        ['project', 'create', '--name', 'x', '--plan', 'platinum'],
        1,
        'invalid_argument',
      ),
      refused(dir, ['project', 'plan', p.id, '--plan', 'platinum'], 1, 'invalid_argument'),
      refused(dir, ['project', 'create', '--name', '  '], 1, 'invalid_argument'),
    ]);
  });
});

describe('postern key', () => {
  const dir = freshStateDir();
  let projectId: string;
  before(async () => {
    projectId = (await ok(dir, ['project', 'create', '--name', 'keys'])).id;
  });

  test('key create --mode live --expires ISO prints the key once with its id, mode and expiry', async () => {
    const k = await ok(dir, [
      'key',
      'create',
      '--project',
      projectId,
      '--mode',
      'live',
      '--expires',
      '2099-01-01T00:00:00Z',
    ]);
    assert.match(k.key, KEY);
    assert.ok(k.key.startsWith('ps_live_'));
    assert.match(k.id, /^k\.[0-9a-z]{16}$/);
    assert.match(k.created_at, ISO);
    assert.deepEqual(k, {
      id: k.id,
      project_id: projectId,
      name: '',
      mode: 'live',
      hint: `ps_live_…${k.key.slice(-4)}`,
      created_at: k.created_at,
      expires_at: '2099-01-01T00:00:00.000Z',
      revoked_at: null,
      last_used_at: null,
      state: 'active',
      key: k.key,
    });
  });

  test('key create --mode test without --expires has no expiry; a date-only --expires is accepted', async () => {
    const k = await ok(dir, ['key', 'create', '--project', projectId, '--mode', 'test']);
    assert.match(k.key, /^ps_test_[A-Za-z0-9]{40}$/);
    assert.equal(k.mode, 'test');
    assert.equal(k.expires_at, null);
    const d = await ok(dir, [
      'key',
      'create',
      '--project',
      projectId,
      '--mode',
      'test',
      '--expires',
      '2099-06-30',
    ]);
    assert.equal(d.expires_at, '2099-06-30T00:00:00.000Z');
  });

  test('key list shows every key of the project but never the key itself', async () => {
    const dir2 = freshStateDir();
    const pid = (await ok(dir2, ['project', 'create', '--name', 'list'])).id;
    const a = await ok(dir2, ['key', 'create', '--project', pid, '--mode', 'live']);
    const b = await ok(dir2, ['key', 'create', '--project', pid, '--mode', 'test']);
    const r = await runCli(['key', 'list', '--project', pid, '--json'], {
      POSTERN_STATE_DIR: dir2,
    });
    assert.equal(r.code, 0);
    const list = oneJsonObject(r);
    const { key: _a, ...aView } = a;
    const { key: _b, ...bView } = b;
    assert.deepEqual(
      [...list.keys].sort((x: any, y: any) => x.id.localeCompare(y.id)),
      [aView, bView].sort((x, y) => x.id.localeCompare(y.id)),
    );
    assert.equal(r.stdout.includes(a.key), false);
    assert.equal(r.stdout.includes(b.key), false);
    const human = await runCli(['key', 'list', '--project', pid], { POSTERN_STATE_DIR: dir2 });
    assert.equal(human.code, 0);
    assert.equal(human.stdout.includes(a.key), false);
    assert.equal(human.stdout.includes(b.key), false);
    assert.equal(human.stderr.includes(a.key), false);
  });

  test('key revoke marks the key revoked', async () => {
    const k = await ok(dir, ['key', 'create', '--project', projectId, '--mode', 'live']);
    const revoked = await ok(dir, ['key', 'revoke', k.id]);
    assert.match(revoked.revoked_at, ISO);
    const { key: _k, ...view } = k;
    assert.deepEqual(revoked, { ...view, revoked_at: revoked.revoked_at, state: 'revoked' });
    assert.equal(JSON.stringify(revoked).includes(k.key), false);
    await refused(dir, ['key', 'revoke', 'k.doesnotexist0000'], 1, 'not_found');
  });

  test('invalid --mode, past or garbage --expires and an unknown project are refused with exit 1', async () => {
    await Promise.all([
      refused(
        dir,
        ['key', 'create', '--project', projectId, '--mode', 'prod'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        [
          'key',
          'create',
          '--project',
          projectId,
          '--mode',
          'live',
          '--expires',
          '2001-01-01T00:00:00Z',
        ],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        ['key', 'create', '--project', projectId, '--mode', 'live', '--expires', 'garbage'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        ['key', 'create', '--project', projectId, '--mode', 'live', '--expires', '2099-13-45'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        ['key', 'create', '--project', 'p.nosuchproject000000', '--mode', 'live'],
        1,
        'not_found',
      ),
      refused(dir, ['key', 'list', '--project', 'p.nosuchproject000000'], 1, 'not_found'),
    ]);
  });

  test('an --expires naming a day that does not exist is refused, not rolled over into the next month', async () => {
    await Promise.all([
      refused(
        dir,
        ['key', 'create', '--project', projectId, '--mode', 'live', '--expires', '2099-02-30'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        [
          'key',
          'create',
          '--project',
          projectId,
          '--mode',
          'live',
          '--expires',
          '2099-04-31T00:00:00Z',
        ],
        1,
        'invalid_argument',
      ),
    ]);
  });

  test('the key is stored only as its SHA-256: the key string occurs nowhere in the database files', async () => {
    const dir2 = freshStateDir();
    const pid = (await ok(dir2, ['project', 'create', '--name', 'hash'])).id;
    const k = await ok(dir2, ['key', 'create', '--project', pid, '--mode', 'live']);
    const files = ['postern.db', 'postern.db-wal']
      .map((f) => path.join(dir2, f))
      .filter((f) => existsSync(f));
    assert.ok(files.includes(path.join(dir2, 'postern.db')));
    for (const file of files) {
      const bytes = readFileSync(file);
      assert.equal(bytes.includes(Buffer.from(k.key, 'utf8')), false, `${file} contains the key`);
      assert.equal(
        bytes.includes(Buffer.from(k.key.slice(8), 'utf8')),
        false,
        `${file} contains the key's secret part`,
      );
    }
    const db = new Database(path.join(dir2, 'postern.db'));
    try {
      const row = db.prepare('SELECT key_hash FROM api_keys WHERE id = ?').get(k.id) as {
        key_hash: Buffer;
      };
      assert.deepEqual(row.key_hash, createHash('sha256').update(k.key, 'utf8').digest());
    } finally {
      db.close();
    }
  });
});

describe('postern provider', () => {
  const dir = freshStateDir();
  let projectId: string;
  before(async () => {
    projectId = (await ok(dir, ['project', 'create', '--name', 'providers'])).id;
  });

  test('attach smtp and an -api provider, list them, detach one; secrets are never printed', async () => {
    const pass = 'SmtpPassMarker7Qx91';
    const apiKey = 'ApiKeyMarker3Zt55';
    const smtpRun = await runCli(
      [
        'provider',
        'attach',
        '--project',
        projectId,
        '--slug',
        'smtp',
        '--host',
        'smtp.example.net',
        '--port',
        '587',
        '--user',
        'mailer',
        '--pass',
        pass,
        '--tls',
        'starttls',
        '--json',
      ],
      { POSTERN_STATE_DIR: dir },
    );
    assert.equal(smtpRun.code, 0, smtpRun.stdout + smtpRun.stderr);
    const smtp = oneJsonObject(smtpRun);
    assert.equal(smtpRun.stdout.includes(pass), false);
    assert.match(smtp.id, /^pa\./);
    assert.match(smtp.created_at, ISO);
    assert.deepEqual(smtp, {
      id: smtp.id,
      project_id: projectId,
      slug: 'smtp',
      vendor: 'Any SMTP relay',
      label: null,
      host: 'smtp.example.net',
      port: 587,
      user: 'mailer',
      tls: 'starttls',
      endpoint: null,
      region: null,
      priority: 100,
      domain: null,
      webhook_public_key: null,
      free_quota: null,
      credentials: { pass: true, api_key: false, webhook_secret: false },
      feedback_path: `/v1/feedback/${smtp.id}`,
      feedback_url: null,
      created_at: smtp.created_at,
    });

    const webhookSecret = 'FeedbackSecretMarker8Kp02';
    const apiRun = await runCli(
      [
        'provider',
        'attach',
        '--project',
        projectId,
        '--slug',
        'provider-a-api',
        '--api-key',
        apiKey,
        '--webhook-secret',
        webhookSecret,
        '--priority',
        '5',
        '--json',
      ],
      {
        POSTERN_STATE_DIR: dir,
      },
    );
    assert.equal(apiRun.code, 0, apiRun.stdout + apiRun.stderr);
    const api = oneJsonObject(apiRun);
    assert.equal(apiRun.stdout.includes(apiKey), false);
    // The webhook secret only in the feedback URL to give the provider, this once (SES checks it as the URL's last segment).
    assert.equal(apiRun.stdout.split(webhookSecret).length, 2);
    assert.match(api.feedback_url, new RegExp(`/v1/feedback/${api.id}/${webhookSecret}$`));
    assert.deepEqual(api, {
      id: api.id,
      project_id: projectId,
      slug: 'provider-a-api',
      vendor: 'Amazon SES API',
      label: null,
      host: null,
      port: null,
      user: null,
      tls: null,
      endpoint: null,
      region: null,
      priority: 5,
      domain: null,
      webhook_public_key: null,
      free_quota: null,
      credentials: { pass: false, api_key: true, webhook_secret: true },
      feedback_path: `/v1/feedback/${api.id}`,
      feedback_url: api.feedback_url,
      created_at: api.created_at,
    });

    const listRun = await runCli(['provider', 'list', '--project', projectId, '--json'], {
      POSTERN_STATE_DIR: dir,
    });
    assert.equal(listRun.code, 0);
    const listedApi = { ...api, feedback_url: api.feedback_url.replace(webhookSecret, '••••••••') };
    assert.deepEqual(oneJsonObject(listRun), { providers: [listedApi, smtp] });
    assert.equal(listRun.stdout.includes(pass), false);
    assert.equal(listRun.stdout.includes(apiKey), false);
    assert.equal(listRun.stdout.includes(webhookSecret), false);
    const humanList = await runCli(['provider', 'list', '--project', projectId], {
      POSTERN_STATE_DIR: dir,
    });
    assert.equal(humanList.code, 0);
    assert.equal(humanList.stdout.includes(pass), false);
    assert.equal(humanList.stdout.includes(apiKey), false);

    assert.deepEqual(await ok(dir, ['provider', 'detach', api.id]), { id: api.id, detached: true });
    assert.deepEqual(await ok(dir, ['provider', 'list', '--project', projectId]), {
      providers: [smtp],
    });
    await refused(dir, ['provider', 'detach', api.id], 1, 'not_found');
  });

  test('an unknown slug, smtp without --host, an -api slug without --api-key and bad values are refused with exit 1', async () => {
    const before = await ok(dir, ['provider', 'list', '--project', projectId]);
    await Promise.all([
      refused(
        dir,
        ['provider', 'attach', '--project', projectId, '--slug', 'carrier-pigeon'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        ['provider', 'attach', '--project', projectId, '--slug', 'smtp', '--port', '25'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        ['provider', 'attach', '--project', projectId, '--slug', 'provider-b-api'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        [
          'provider',
          'attach',
          '--project',
          projectId,
          '--slug',
          'smtp',
          '--host',
          'h',
          '--tls',
          'maybe',
        ],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        [
          'provider',
          'attach',
          '--project',
          projectId,
          '--slug',
          'smtp',
          '--host',
          'h',
          '--port',
          '70000',
        ],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        [
          'provider',
          'attach',
          '--project',
          'p.nosuchproject000000',
          '--slug',
          'smtp',
          '--host',
          'h',
        ],
        1,
        'not_found',
      ),
    ]);
    // Nothing was attached by the refused commands.
    assert.deepEqual(await ok(dir, ['provider', 'list', '--project', projectId]), before);
  });
});

describe('postern suppression', () => {
  const dir = freshStateDir();
  let projectId: string;
  before(async () => {
    projectId = (await ok(dir, ['project', 'create', '--name', 'suppressions'])).id;
  });

  test('add, list and remove, matching addresses case-insensitively', async () => {
    const added = await ok(dir, [
      'suppression',
      'add',
      '--project',
      projectId,
      '--email',
      'Foo@Example.com',
    ]);
    assert.match(added.created_at, ISO);
    assert.deepEqual(added, {
      project_id: projectId,
      email: 'Foo@Example.com',
      reason: 'manual',
      created_at: added.created_at,
    });
    const other = await ok(dir, [
      'suppression',
      'add',
      '--project',
      projectId,
      '--email',
      'bar@example.org',
      '--reason',
      'complaint',
    ]);
    assert.equal(other.reason, 'complaint');

    // The same address in another case is the same entry.
    await ok(dir, ['suppression', 'add', '--project', projectId, '--email', 'FOO@example.COM']);
    const list = await ok(dir, ['suppression', 'list', '--project', projectId]);
    assert.deepEqual(list.suppressions.map((s: any) => s.email.toLowerCase()).sort(), [
      'bar@example.org',
      'foo@example.com',
    ]);

    assert.deepEqual(
      await ok(dir, [
        'suppression',
        'remove',
        '--project',
        projectId,
        '--email',
        'foo@example.com',
      ]),
      {
        project_id: projectId,
        email: 'foo@example.com',
        removed: true,
      },
    );
    const after = await ok(dir, ['suppression', 'list', '--project', projectId]);
    assert.deepEqual(after, {
      suppressions: [
        { email: 'bar@example.org', reason: 'complaint', created_at: other.created_at },
      ],
    });
    await refused(
      dir,
      ['suppression', 'remove', '--project', projectId, '--email', 'foo@example.com'],
      1,
      'not_found',
    );
  });

  test('an invalid address or unknown project is refused with exit 1', async () => {
    await Promise.all([
      refused(
        dir,
        ['suppression', 'add', '--project', projectId, '--email', 'not-an-address'],
        1,
        'invalid_argument',
      ),
      refused(dir, ['suppression', 'list', '--project', 'p.nosuchproject000000'], 1, 'not_found'),
    ]);
  });
});

describe('postern message, against the state dir of a running server', () => {
  let server: TestPostern;
  let dir: string;
  let projectId: string;
  let liveKey: string;
  let testKey: string;
  const ids: Record<string, string> = {};

  async function send(
    base: string,
    key: string,
    overrides: Record<string, unknown> = {},
  ): Promise<any> {
    const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
    assert.equal(res.status, 202, res.text);
    return res.body;
  }

  before(async () => {
    dir = freshStateDir();
    server = await startTestPostern({ stateDir: dir });
    // Project and keys come from the CLI while the server runs; the server honours them.
    projectId = (await ok(dir, ['project', 'create', '--name', 'messages', '--plan', 'pro'])).id;
    await ok(dir, [
      'provider',
      'attach',
      '--project',
      projectId,
      '--slug',
      'smtp',
      '--host',
      'smtp.example.net',
    ]);
    liveKey = (await ok(dir, ['key', 'create', '--project', projectId, '--mode', 'live'])).key;
    testKey = (await ok(dir, ['key', 'create', '--project', projectId, '--mode', 'test'])).key;
    ids.captured = (await send(server.sandbox, testKey, { subject: 'captured one' })).id;
    ids.paused = (
      await send(server.production, liveKey, { paused: true, subject: 'paused one' })
    ).id;
    ids.queued = (await send(server.production, liveKey, { subject: 'queued one' })).id;
    ids.scheduled = (
      await send(server.production, liveKey, {
        scheduled_at: new Date(Date.now() + 3600_000).toISOString(),
        subject: 'scheduled one',
      })
    ).id;
  });
  after(async () => server?.close());

  test('message list shows the project messages, newest first', async () => {
    const list = await ok(dir, ['message', 'list', '--project', projectId]);
    assert.equal(list.messages.length, 4);
    assert.deepEqual(new Set(list.messages.map((m: any) => m.id)), new Set(Object.values(ids)));
    const created = list.messages.map((m: any) => m.created_at);
    assert.deepEqual(created, [...created].sort().reverse());
    const byId = new Map(list.messages.map((m: any) => [m.id, m]));
    assert.deepEqual(byId.get(ids.captured), {
      id: ids.captured,
      project_id: projectId,
      environment: 'sandbox',
      sandbox: true,
      source: 'http',
      status: 'captured',
      paused: false,
      from: 'sender@example.com',
      from_name: 'Sender',
      to: ['rcpt@example.org'],
      subject: 'captured one',
      category: null,
      tags: [],
      scheduled_at: null,
      created_at: (byId.get(ids.captured) as any).created_at,
      attempts: 0,
      next_attempt_at: null,
      last_error: null,
    });
  });

  test('message list --status filters and --limit limits', async () => {
    const captured = await ok(dir, [
      'message',
      'list',
      '--project',
      projectId,
      '--status',
      'captured',
    ]);
    assert.deepEqual(
      captured.messages.map((m: any) => m.id),
      [ids.captured],
    );
    const paused = await ok(dir, ['message', 'list', '--project', projectId, '--status', 'paused']);
    assert.deepEqual(
      paused.messages.map((m: any) => [m.id, m.status, m.paused]),
      [[ids.paused, 'paused', true]],
    );
    const scheduled = await ok(dir, [
      'message',
      'list',
      '--project',
      projectId,
      '--status',
      'scheduled',
    ]);
    assert.deepEqual(
      scheduled.messages.map((m: any) => m.id),
      [ids.scheduled],
    );
    const none = await ok(dir, ['message', 'list', '--project', projectId, '--status', 'bounced']);
    assert.deepEqual(none, { messages: [] });
    const all = await ok(dir, ['message', 'list', '--project', projectId]);
    const two = await ok(dir, ['message', 'list', '--project', projectId, '--limit', '2']);
    assert.deepEqual(two.messages, all.messages.slice(0, 2));
    const one = await ok(dir, ['message', 'list', '--project', projectId, '--limit', '1']);
    assert.deepEqual(one.messages, all.messages.slice(0, 1));
  });

  test('message list refuses a bad --status or --limit with exit 1', async () => {
    await Promise.all([
      refused(
        dir,
        ['message', 'list', '--project', projectId, '--status', 'lost'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        ['message', 'list', '--project', projectId, '--limit', 'ten'],
        1,
        'invalid_argument',
      ),
      refused(
        dir,
        ['message', 'list', '--project', projectId, '--limit', '0'],
        1,
        'invalid_argument',
      ),
      refused(dir, ['message', 'list', '--project', 'p.nosuchproject000000'], 1, 'not_found'),
    ]);
  });

  test('message show prints the message with its events', async () => {
    const m = await ok(dir, ['message', 'show', ids.queued]);
    assert.equal(m.id, ids.queued);
    assert.equal(m.project_id, projectId);
    assert.equal(m.status, 'queued');
    assert.equal(m.environment, 'production');
    assert.equal(m.sandbox, false);
    assert.equal(m.subject, 'queued one');
    assert.equal(m.from, 'sender@example.com');
    assert.deepEqual(m.to, ['rcpt@example.org']);
    assert.deepEqual(m.cc, []);
    assert.deepEqual(m.bcc, []);
    assert.equal(m.hold_reason, null);
    assert.equal(m.spool_path, null, 'a small message is kept in the index, not a spool file');
    assert.deepEqual(
      m.events.map((e: any) => e.type),
      ['mail.accepted'],
    );
    await refused(dir, ['message', 'show', 'm.doesnotexist00000000000000'], 1, 'not_found');
  });

  test('message show --raw prints the stored MIME itself', async () => {
    const r = await runCli(['message', 'show', ids.queued, '--raw'], { POSTERN_STATE_DIR: dir });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json, undefined);
    assert.match(r.stdout, /^[A-Za-z][A-Za-z0-9-]*: /);
    assert.ok(r.stdout.includes(`Message-ID: <${ids.queued}@example.com>`), r.stdout);
    assert.ok(r.stdout.includes('Subject: queued one'));
    assert.equal(
      r.stdout,
      await withClosedIndex(dir, async (ctx) =>
        (await storedMimeOf(ctx.store, dir, ids.queued)).toString('utf8'),
      ),
    );
  });

  test('message release lets a paused message go on; releasing a queued one is a conflict', async () => {
    const released = await ok(dir, ['message', 'release', ids.paused]);
    assert.equal(released.id, ids.paused);
    assert.equal(released.status, 'queued');
    assert.equal(released.paused, false);
    await refused(dir, ['message', 'release', ids.queued], 1, 'conflict');
    await refused(dir, ['message', 'release', 'm.doesnotexist00000000000000'], 1, 'not_found');
  });

  test('message cancel stops a scheduled message; cancelling it again is a conflict', async () => {
    const cancelled = await ok(dir, ['message', 'cancel', ids.scheduled]);
    assert.equal(cancelled.id, ids.scheduled);
    assert.equal(cancelled.status, 'cancelled');
    await refused(dir, ['message', 'cancel', ids.scheduled], 1, 'conflict');
    const list = await ok(dir, [
      'message',
      'list',
      '--project',
      projectId,
      '--status',
      'cancelled',
    ]);
    assert.deepEqual(
      list.messages.map((m: any) => m.id),
      [ids.scheduled],
    );
  });

  test('project pause from the CLI holds the running server’s next send; resume releases it', async () => {
    await ok(dir, ['project', 'pause', projectId]);
    const held = await send(server.production, liveKey, { subject: 'held by pause' });
    assert.equal(held.status, 'paused');
    const resumed = await ok(dir, ['project', 'resume', projectId]);
    assert.equal(resumed.paused, false);
    assert.equal(resumed.released, 1);
    assert.equal((await ok(dir, ['message', 'show', held.id])).status, 'queued');
  });

  test('a key revoked from the CLI stops working on the running server', async () => {
    const k = await ok(dir, ['key', 'create', '--project', projectId, '--mode', 'live']);
    await send(server.production, k.key);
    await ok(dir, ['key', 'revoke', k.id]);
    const res = await post(server.production, '/v1/send', { key: k.key, json: validMessage() });
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'invalid_api_key');
  });
});

describe('postern usage errors', () => {
  const dir = freshStateDir();

  test('an unknown project id is refused with a JSON error and exit 1', async () => {
    const err = await refused(dir, ['project', 'pause', 'p.nosuchproject000000'], 1, 'not_found');
    assert.ok(err.message.includes('p.nosuchproject000000'));
  });

  test('a missing required flag is a usage error with exit 2', async () => {
    await Promise.all([
      refused(dir, ['project', 'create'], 2, 'usage'),
      refused(dir, ['key', 'create', '--project', 'p.x'], 2, 'usage'),
      refused(dir, ['key', 'list'], 2, 'usage'),
      refused(dir, ['provider', 'attach', '--project', 'p.x'], 2, 'usage'),
      refused(dir, ['suppression', 'add', '--project', 'p.x'], 2, 'usage'),
      refused(dir, ['message', 'list'], 2, 'usage'),
    ]);
  });

  test('a missing or extra positional argument or an unknown flag is a usage error with exit 2', async () => {
    await Promise.all([
      refused(dir, ['project', 'pause'], 2, 'usage'),
      refused(dir, ['project', 'pause', 'p.a', 'p.b'], 2, 'usage'),
      refused(dir, ['project', 'create', '--name', 'x', '--colour', 'blue'], 2, 'usage'),
      refused(dir, ['message', 'show'], 2, 'usage'),
    ]);
  });

  test('an unknown command exits 2', async () => {
    await Promise.all([
      refused(dir, ['frobnicate'], 2, 'usage'),
      refused(dir, ['project', 'frobnicate'], 2, 'usage'),
      refused(dir, ['project'], 2, 'usage'),
    ]);
    const human = await runCli(['frobnicate'], { POSTERN_STATE_DIR: dir });
    assert.equal(human.code, 2);
    assert.equal(human.stdout, '');
    assert.ok(human.stderr.includes('unknown command'));
  });

  test('no command prints the usage and exits 2', async () => {
    const r = await runCli([], { POSTERN_STATE_DIR: dir });
    assert.equal(r.code, 2);
    assert.ok(r.stdout.includes('usage: postern'));
  });
});

describe('postern without --json', () => {
  const dir = freshStateDir();

  test('prints human-readable text, not JSON, and exits 0', async () => {
    const created = await runCli(['project', 'create', '--name', 'Human'], {
      POSTERN_STATE_DIR: dir,
    });
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.json, undefined);
    assert.throws(() => JSON.parse(created.stdout));
    const id = /^id: (p\.[0-9a-z]{20})$/m.exec(created.stdout)?.[1];
    assert.ok(id, created.stdout);
    assert.match(created.stdout, /^name: Human$/m);
    assert.match(created.stdout, /^plan: free$/m);

    const key = await runCli(['key', 'create', '--project', id, '--mode', 'live'], {
      POSTERN_STATE_DIR: dir,
    });
    assert.equal(key.code, 0, key.stderr);
    assert.equal(key.json, undefined);
    assert.match(key.stdout, /^key: ps_live_[A-Za-z0-9]{40}$/m);

    const list = await runCli(['key', 'list', '--project', id], { POSTERN_STATE_DIR: dir });
    assert.equal(list.code, 0, list.stderr);
    assert.equal(list.json, undefined);
    assert.match(list.stdout, /^keys: /m);
    assert.match(list.stdout, /mode=live/);
  });

  test('a refusal goes to stderr as text with the same exit code', async () => {
    const r = await runCli(['project', 'pause', 'p.nosuchproject000000'], {
      POSTERN_STATE_DIR: dir,
    });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^postern: project p\.nosuchproject000000 not found/m);
  });
});
