import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { getValue } from '../../src/store/queries.js';
import { createProjectWithKeys, startTestPostern, type TestPostern } from '../support/postern.js';
import { storedMimeOf } from '../support/storedMime.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

/**
 * The SMTP door driven by swaks, a real Perl SMTP client run as a child process. CI installs
 * it (.ci/run); a machine without it fails here on purpose rather than skipping.
 */

interface SwaksResult {
  code: number;
  output: string;
}

/** Runs swaks asynchronously (the server lives in this process: a sync spawn would deadlock it). */
function swaks(args: string[]): Promise<SwaksResult> {
  return new Promise((resolve, reject) => {
    execFile(
      'swaks',
      ['--server', '127.0.0.1', '--timeout', String(HANG_GUARD_MS / 1000), ...args],
      { timeout: HANG_GUARD_MS },
      (err, stdout, stderr) => {
        if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
          reject(
            new Error(
              'swaks is not on PATH: install it (apt-get install swaks); these tests need a real SMTP client',
            ),
          );
          return;
        }
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, output: `${stdout}${stderr}` });
      },
    );
  });
}

/** The id from swaks' transcript line `<~  250 2.0.0 OK queued as m.…`. */
function queuedId(result: SwaksResult): string {
  const m = /^<[~-] {2}250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/m.exec(result.output);
  assert.ok(
    m,
    `expected "250 2.0.0 OK queued as m.…" in swaks' output (exit ${result.code}):\n${result.output}`,
  );
  assert.equal(result.code, 0, result.output);
  return m[1];
}

/** The Message-Id header swaks generated and sent (` ~> Message-Id: <…>`). */
function sentMessageId(result: SwaksResult): string {
  const m = /^ [~-]> Message-Id: (<[^>]+>)$/im.exec(result.output);
  assert.ok(m, `swaks sent a Message-Id:\n${result.output}`);
  return m[1];
}

interface Expected {
  projectId: string;
  projectName: string;
  environment: 'production' | 'sandbox';
  status: string;
  from: string;
  recipients: { to: string[]; cc: string[]; bcc: string[] };
  subject: string;
  tags: string[];
  metadata: Record<string, string>;
  category: string | null;
  messageId: string;
  hidden: string[];
  body: string;
}

/** Row, mail.accepted event and stored MIME of one accepted message. */
async function assertStored(p: TestPostern, id: string, e: Expected): Promise<void> {
  const row = await p.ctx.store.get<Record<string, any>>('SELECT * FROM messages WHERE id = ?', id);
  assert.ok(row, `a messages row for ${id}`);
  assert.deepEqual(
    {
      project_id: row.project_id,
      environment: row.environment,
      source: row.source,
      status: row.status,
      from_email: row.from_email,
      recipients: JSON.parse(row.recipients),
      subject: row.subject,
      tags: JSON.parse(row.tags),
      metadata: JSON.parse(row.metadata),
      category: row.category,
      routing: JSON.parse(row.routing),
      scheduled_at: row.scheduled_at,
    },
    {
      project_id: e.projectId,
      environment: e.environment,
      source: 'smtp',
      status: e.status,
      from_email: e.from,
      recipients: e.recipients,
      subject: e.subject,
      tags: e.tags,
      metadata: e.metadata,
      category: e.category,
      routing: { provider: null, strategy: null },
      scheduled_at: null,
    },
  );

  const events = await p.ctx.store.all<{ type: string; project_id: string; data: string }>(
    'SELECT type, project_id, data FROM events WHERE message_id = ? ORDER BY seq',
    id,
  );
  assert.deepEqual(
    events.map((ev) => [ev.type, ev.project_id]),
    [['mail.accepted', e.projectId]],
  );
  const data = JSON.parse(events[0].data) as { mail: Record<string, unknown> };
  const { uid, subject, from, to, project, tags, metadata } = data.mail;
  assert.deepEqual(
    { uid, subject, from, to, project, tags, metadata },
    {
      uid: id,
      subject: e.subject,
      from: e.from,
      to: e.recipients.to,
      project: { uid: e.projectId, name: e.projectName },
      tags: e.tags,
      metadata: e.metadata,
    },
  );

  const stored = await storedMimeOf(p.ctx.store, p.stateDir, id);
  assert.equal(stored.length, row.size_bytes);
  const mime = stored.toString('utf8');
  const end = mime.indexOf('\r\n\r\n');
  const headers = mime.slice(0, end).replace(/\r\n[ \t]+/g, ' ');
  assert.doesNotMatch(headers, /^X-Service-/im, 'control headers are stripped');
  assert.doesNotMatch(headers, /^Bcc:/im, 'no Bcc header');
  for (const hidden of e.hidden)
    assert.ok(!headers.toLowerCase().includes(hidden), `${hidden} is in no header`);
  const ids = headers
    .split('\r\n')
    .filter((l) => /^Message-ID:/i.test(l))
    .map((l) => l.slice(l.indexOf(':') + 1).trim());
  assert.deepEqual(ids, [e.messageId], "swaks' own Message-Id is kept, and no other is added");
  assert.match(headers, new RegExp(`^Subject: ${e.subject}$`, 'm'));
  assert.ok(mime.slice(end).includes(e.body), 'the body is stored');
}

describe('SMTP door with swaks', () => {
  let p: TestPostern;
  before(async () => {
    const version = await swaks(['--version']);
    assert.equal(version.code, 0, `swaks --version failed:\n${version.output}`);
    p = await startTestPostern({ smtp: true });
  });
  after(async () => p?.close());

  test('production over STARTTLS with AUTH PLAIN: 250 2.0.0 OK queued as m.…, a queued row, the event and the stored MIME', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'swaks production');
    const result = await swaks([
      '--port',
      String(p.smtp.production.starttls),
      '--tls',
      '--auth',
      'PLAIN',
      '--auth-user',
      'legacy-app',
      '--auth-password',
      liveKey,
      '--from',
      'app@example.com',
      // hidden@ is an envelope recipient only: it must be stored as bcc and appear in no header.
      '--to',
      'user@example.org,hidden@example.net',
      '--header',
      'To: User <user@example.org>',
      '--header',
      'Subject: Hello from swaks',
      '--header',
      'X-Service-Tags: legacy, swaks',
      '--header',
      'X-Service-Metadata: {"order":"1234"}',
      '--header',
      'X-Service-Category: Receipts',
      '--body',
      'Body sent by swaks over STARTTLS',
    ]);
    const id = queuedId(result);
    assert.match(
      result.output,
      /^<- {2}220 .*\n(?:.*\n)*? -> STARTTLS$/m,
      'swaks upgraded with STARTTLS',
    );
    await assertStored(p, id, {
      projectId: project.id,
      projectName: project.name,
      environment: 'production',
      status: 'queued',
      from: 'app@example.com',
      recipients: { to: ['user@example.org'], cc: [], bcc: ['hidden@example.net'] },
      subject: 'Hello from swaks',
      tags: ['legacy', 'swaks'],
      metadata: { order: '1234' },
      category: 'Receipts',
      messageId: sentMessageId(result),
      hidden: ['hidden@example.net'],
      body: 'Body sent by swaks over STARTTLS',
    });
  });

  test('sandbox over implicit TLS with the test key: captured', async () => {
    const { project, testKey } = await createProjectWithKeys(p.ctx, 'swaks sandbox');
    const result = await swaks([
      '--port',
      String(p.smtp.sandbox.implicit),
      '--tlsc',
      '--auth',
      'PLAIN',
      '--auth-user',
      'legacy-app',
      '--auth-password',
      testKey,
      '--from',
      'app@example.com',
      '--to',
      'user@example.org',
      '--header',
      'Subject: Sandbox from swaks',
      '--header',
      'X-Service-Tags: sandbox',
      '--body',
      'Body sent by swaks over implicit TLS',
    ]);
    const id = queuedId(result);
    assert.match(result.output, /^=== TLS started/m);
    await assertStored(p, id, {
      projectId: project.id,
      projectName: project.name,
      environment: 'sandbox',
      status: 'captured',
      from: 'app@example.com',
      recipients: { to: ['user@example.org'], cc: [], bcc: [] },
      subject: 'Sandbox from swaks',
      tags: ['sandbox'],
      metadata: {},
      category: null,
      messageId: sentMessageId(result),
      hidden: [],
      body: 'Body sent by swaks over implicit TLS',
    });
  });

  test('AUTH LOGIN over implicit TLS on production is accepted too', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'swaks login');
    const result = await swaks([
      '--port',
      String(p.smtp.production.implicit),
      '--tlsc',
      '--auth',
      'LOGIN',
      '--auth-user',
      'legacy-app',
      '--auth-password',
      liveKey,
      '--from',
      'app@example.com',
      '--to',
      'user@example.org',
      '--header',
      'Subject: Login from swaks',
      '--body',
      'Body sent with AUTH LOGIN',
    ]);
    const id = queuedId(result);
    await assertStored(p, id, {
      projectId: project.id,
      projectName: project.name,
      environment: 'production',
      status: 'queued',
      from: 'app@example.com',
      recipients: { to: ['user@example.org'], cc: [], bcc: [] },
      subject: 'Login from swaks',
      tags: [],
      metadata: {},
      category: null,
      messageId: sentMessageId(result),
      hidden: [],
      body: 'Body sent with AUTH LOGIN',
    });
  });

  test('open-relay attempt without --auth: 530 5.7.0 at MAIL FROM, over STARTTLS and implicit TLS; nothing stored', async () => {
    const countBefore = await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages');
    for (const args of [
      ['--port', String(p.smtp.production.starttls), '--tls'],
      ['--port', String(p.smtp.production.implicit), '--tlsc'],
      ['--port', String(p.smtp.sandbox.starttls), '--tls'],
    ]) {
      const result = await swaks([
        ...args,
        '--from',
        'spammer@example.com',
        '--to',
        'victim@example.net',
        '--header',
        'Subject: relay?',
        '--body',
        'relay attempt',
      ]);
      assert.notEqual(result.code, 0, result.output);
      assert.match(result.output, /^<[~-]\* 530 5\.7\.0 /m, result.output);
      assert.doesNotMatch(result.output, /queued as/);
    }
    assert.equal(await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages'), countBefore);
  });

  test('a bad key is refused with 535 5.7.8 and the contract code', async () => {
    const result = await swaks([
      '--port',
      String(p.smtp.production.starttls),
      '--tls',
      '--auth',
      'PLAIN',
      '--auth-user',
      'legacy-app',
      '--auth-password',
      `ps_live_${'Z'.repeat(40)}`,
      '--from',
      'app@example.com',
      '--to',
      'user@example.org',
    ]);
    assert.notEqual(result.code, 0, result.output);
    assert.match(result.output, /^<~\* 535 5\.7\.8 invalid_api_key: /m, result.output);
  });
});
