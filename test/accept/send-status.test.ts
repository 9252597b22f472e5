import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { OperatorError } from '../../src/operator/errors.js';
import { cancelMessage, releaseMessage } from '../../src/operator/messages.js';
import { setPaused } from '../../src/operator/projects.js';
import { attachProvider } from '../../src/operator/providers.js';
import { serverWithProject } from '../support/hooks.js';
import {
  createProjectWithKeys,
  get,
  type HttpResult,
  type ProjectWithKeys,
  post,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeOf } from '../support/storedMime.js';

const HOUR = 3600_000;
const ID = /^m\.[0-9a-z]{26}$/;

interface MessageRowLite {
  id: string;
  project_id: string;
  environment: string;
  status: string;
  hold_reason: string | null;
  recipients: string;
  subject: string;
  category: string | null;
  routing: string;
  scheduled_at: number | null;
  spool_path: string;
}

/** An instant `aheadMs` from now, written with the given UTC offset (e.g. "+02:00"), to whole seconds. */
function instantWithOffset(aheadMs: number, offset: string): string {
  const sign = offset.startsWith('-') ? -1 : 1;
  const [h, m] = offset.slice(1).split(':').map(Number);
  const offsetMs = sign * (h * 60 + m) * 60_000;
  const at = Math.floor((Date.now() + aheadMs) / 1000) * 1000;
  return new Date(at + offsetMs).toISOString().slice(0, 19) + offset;
}

/** The exact 202 body for a send, with the id taken from the response. */
function expected202(
  res: HttpResult,
  fields: {
    status: string;
    project_id: string;
    scheduled_at?: string | null;
    paused?: boolean;
    category?: string | null;
    routing?: { provider: unknown; strategy: unknown };
  },
) {
  return {
    id: res.body.id,
    status: fields.status,
    scheduled_at: fields.scheduled_at ?? null,
    paused: fields.paused ?? false,
    category: fields.category ?? null,
    project_id: fields.project_id,
    routing: fields.routing ?? { provider: null, strategy: null },
  };
}

describe('POST /v1/send: statuses, the 202 body and what is stored', () => {
  let p: TestPostern;
  let proj: ProjectWithKeys;

  serverWithProject('status project', (server, project) => {
    p = server;
    proj = project;
  });

  const row = (id: string) =>
    p.ctx.store.get<MessageRowLite>('SELECT * FROM messages WHERE id = ?', id);

  /** Unfolded header block of a spooled MIME file. */
  async function spooledHeaders(id: string): Promise<{ headers: string; file: string }> {
    const r = await row(id);
    assert.ok(r, `messages row for ${id}`);
    const raw = (await storedMimeOf(p.ctx.store, p.stateDir, id)).toString('utf8');
    const end = raw.indexOf('\r\n\r\n');
    assert.ok(end > 0, 'MIME file has a header block');
    return { headers: raw.slice(0, end).replace(/\r\n[ \t]+/g, ' '), file: raw };
  }

  function headerValues(headers: string, name: string): string[] {
    return headers
      .split('\r\n')
      .filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
      .map((l) => l.slice(name.length + 1).trim());
  }

  /** Every acceptance leaves: the row with `status`, the MIME file, and a mail.accepted event. */
  async function assertStored(
    res: HttpResult,
    status: string,
    msg: { subject: string; to: string; fromDomain: string },
  ) {
    const id = res.body.id as string;
    const r = await row(id);
    assert.ok(r, 'a messages row exists');
    assert.equal(r.status, status);
    assert.equal(r.project_id, res.body.project_id);
    assert.equal(r.subject, msg.subject);
    const { headers } = await spooledHeaders(id);
    assert.deepEqual(headerValues(headers, 'Message-ID'), [`<${id}@${msg.fromDomain}>`]);
    assert.deepEqual(headerValues(headers, 'Subject'), [msg.subject]);
    assert.equal(headerValues(headers, 'To').length, 1);
    assert.ok(headerValues(headers, 'To')[0].includes(msg.to), `To header names ${msg.to}`);
    const events = await p.ctx.store.all<{ project_id: string; data: string }>(
      "SELECT * FROM events WHERE message_id = ? AND type = 'mail.accepted'",
      id,
    );
    assert.equal(events.length, 1, 'one mail.accepted event');
    assert.equal(events[0].project_id, res.body.project_id);
    const data = JSON.parse(events[0].data) as {
      mail: { uid: string; subject: string; project: { uid: string } };
    };
    assert.equal(data.mail.uid, id);
    assert.equal(data.mail.subject, msg.subject);
    assert.equal(data.mail.project.uid, res.body.project_id);
  }

  const plain = { subject: 'Hello', to: 'rcpt@example.org', fromDomain: 'example.com' };

  test('a live send on production is queued, with exactly the seven SendAccepted keys', async () => {
    const res = await post(p.production, '/v1/send', { key: proj.liveKey, json: validMessage() });
    assert.equal(res.status, 202);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.match(res.body.id, ID);
    assert.deepEqual(Object.keys(res.body).sort(), [
      'category',
      'id',
      'paused',
      'project_id',
      'routing',
      'scheduled_at',
      'status',
    ]);
    assert.deepEqual(res.body, expected202(res, { status: 'queued', project_id: proj.project.id }));
    await assertStored(res, 'queued', plain);
  });

  test('two sends get different ids', async () => {
    const a = await post(p.production, '/v1/send', { key: proj.liveKey, json: validMessage() });
    const b = await post(p.production, '/v1/send', { key: proj.liveKey, json: validMessage() });
    assert.equal(a.status, 202);
    assert.equal(b.status, 202);
    assert.notEqual(a.body.id, b.body.id);
  });

  test('a future scheduled_at gives scheduled and is echoed verbatim with its +02:00 offset', async () => {
    const scheduledAt = instantWithOffset(2 * HOUR, '+02:00');
    const res = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: validMessage({ scheduled_at: scheduledAt }),
    });
    assert.equal(res.status, 202);
    assert.deepEqual(
      res.body,
      expected202(res, {
        status: 'scheduled',
        project_id: proj.project.id,
        scheduled_at: scheduledAt,
      }),
    );
    assert.ok(scheduledAt.endsWith('+02:00'));
    await assertStored(res, 'scheduled', plain);
    assert.equal((await row(res.body.id))!.scheduled_at, Date.parse(scheduledAt));
  });

  test('scheduled_at with fractional seconds and a negative offset is echoed verbatim', async () => {
    const base = instantWithOffset(3 * HOUR, '-05:30');
    const scheduledAt = `${base.slice(0, 19)}.250${base.slice(19)}`;
    const res = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: validMessage({ scheduled_at: scheduledAt }),
    });
    assert.equal(res.status, 202);
    assert.deepEqual(
      res.body,
      expected202(res, {
        status: 'scheduled',
        project_id: proj.project.id,
        scheduled_at: scheduledAt,
      }),
    );
  });

  test('paused: true gives paused', async () => {
    const res = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: validMessage({ paused: true }),
    });
    assert.equal(res.status, 202);
    assert.deepEqual(
      res.body,
      expected202(res, { status: 'paused', project_id: proj.project.id, paused: true }),
    );
    await assertStored(res, 'paused', plain);
    assert.equal((await row(res.body.id))!.hold_reason, 'request');
  });

  test('paused: false and paused: null are not held', async () => {
    for (const paused of [false, null]) {
      const res = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ paused }),
      });
      assert.equal(res.status, 202);
      assert.deepEqual(
        res.body,
        expected202(res, { status: 'queued', project_id: proj.project.id }),
      );
    }
  });

  test('paused with a future scheduled_at reports paused (held wins over scheduled)', async () => {
    const scheduledAt = instantWithOffset(HOUR, '+02:00');
    const res = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: validMessage({ paused: true, scheduled_at: scheduledAt }),
    });
    assert.equal(res.status, 202);
    assert.deepEqual(
      res.body,
      expected202(res, {
        status: 'paused',
        project_id: proj.project.id,
        paused: true,
        scheduled_at: scheduledAt,
      }),
    );
    await assertStored(res, 'paused', plain);
  });

  test('a test send on the sandbox is captured', async () => {
    const res = await post(p.sandbox, '/v1/send', { key: proj.testKey, json: validMessage() });
    assert.equal(res.status, 202);
    assert.deepEqual(
      res.body,
      expected202(res, { status: 'captured', project_id: proj.project.id }),
    );
    await assertStored(res, 'captured', plain);
    assert.equal((await row(res.body.id))!.environment, 'sandbox');
  });

  test('a sandbox send with paused: true is captured and reports paused: true', async () => {
    const res = await post(p.sandbox, '/v1/send', {
      key: proj.testKey,
      json: validMessage({ paused: true }),
    });
    assert.equal(res.status, 202);
    assert.deepEqual(
      res.body,
      expected202(res, { status: 'captured', project_id: proj.project.id, paused: true }),
    );
    await assertStored(res, 'captured', plain);
  });

  test('a sandbox send with a future scheduled_at is captured and echoes scheduled_at', async () => {
    const scheduledAt = instantWithOffset(HOUR, '+02:00');
    const res = await post(p.sandbox, '/v1/send', {
      key: proj.testKey,
      json: validMessage({ scheduled_at: scheduledAt }),
    });
    assert.equal(res.status, 202);
    assert.deepEqual(
      res.body,
      expected202(res, {
        status: 'captured',
        project_id: proj.project.id,
        scheduled_at: scheduledAt,
      }),
    );
  });

  test('a paused project holds new sends as paused; resuming queues exactly the project-held ones', async () => {
    const q = await createProjectWithKeys(p.ctx, 'pausable');
    await setPaused(p.ctx, q.project.id, true);

    const held = await post(p.production, '/v1/send', { key: q.liveKey, json: validMessage() });
    assert.equal(held.status, 202);
    assert.deepEqual(
      held.body,
      expected202(held, { status: 'paused', project_id: q.project.id, paused: true }),
    );
    await assertStored(held, 'paused', plain);
    assert.equal((await row(held.body.id))!.hold_reason, 'project');

    const heldAndFlagged = await post(p.production, '/v1/send', {
      key: q.liveKey,
      json: validMessage({ paused: true }),
    });
    assert.deepEqual(
      heldAndFlagged.body,
      expected202(heldAndFlagged, { status: 'paused', project_id: q.project.id, paused: true }),
    );

    const scheduledAt = instantWithOffset(2 * HOUR, '+02:00');
    const heldScheduled = await post(p.production, '/v1/send', {
      key: q.liveKey,
      json: validMessage({ scheduled_at: scheduledAt }),
    });
    assert.deepEqual(
      heldScheduled.body,
      expected202(heldScheduled, {
        status: 'paused',
        project_id: q.project.id,
        paused: true,
        scheduled_at: scheduledAt,
      }),
    );

    const sandbox = await post(p.sandbox, '/v1/send', { key: q.testKey, json: validMessage() });
    assert.deepEqual(
      sandbox.body,
      expected202(sandbox, { status: 'captured', project_id: q.project.id, paused: true }),
    );

    const resumed = await setPaused(p.ctx, q.project.id, false);
    assert.equal(resumed.paused, false);
    assert.equal((await row(held.body.id))!.status, 'queued');
    assert.equal((await row(held.body.id))!.hold_reason, null);
    assert.equal((await row(heldScheduled.body.id))!.status, 'scheduled');
    // Held by its own flag, not by the project: resuming does not release it.
    assert.equal((await row(heldAndFlagged.body.id))!.status, 'paused');
    assert.equal((await row(sandbox.body.id))!.status, 'captured');
    // The captured sandbox message is no longer held by the pause once the project resumes.
    assert.equal((await row(sandbox.body.id))!.hold_reason, null);

    const later = await post(p.production, '/v1/send', { key: q.liveKey, json: validMessage() });
    assert.deepEqual(
      later.body,
      expected202(later, { status: 'queued', project_id: q.project.id }),
    );
  });

  test('category is echoed verbatim (case and punctuation kept); null is echoed as null', async () => {
    for (const category of ['Welcome', 'password-reset/v2: EU_1.a', '9 lives']) {
      const res = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ category }),
      });
      assert.equal(res.status, 202, res.text);
      assert.deepEqual(
        res.body,
        expected202(res, { status: 'queued', project_id: proj.project.id, category }),
      );
      assert.equal((await row(res.body.id))!.category, category);
    }
    const res = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: validMessage({ category: null }),
    });
    assert.deepEqual(res.body, expected202(res, { status: 'queued', project_id: proj.project.id }));
  });

  describe('routing echo', () => {
    let r: ProjectWithKeys;
    before(async () => {
      r = await createProjectWithKeys(p.ctx, 'routing');
      await attachProvider(p.ctx, r.project.id, { slug: 'smtp', host: 'smtp.example.net' });
      await attachProvider(p.ctx, r.project.id, { slug: 'provider-a-api', apiKey: 'a-key' });
    });

    const cases: [string, unknown, { provider: unknown; strategy: unknown }][] = [
      ['a single provider pin', { provider: 'smtp' }, { provider: 'smtp', strategy: null }],
      [
        'a provider preference list',
        { provider: ['provider-a-api', 'smtp'] },
        { provider: ['provider-a-api', 'smtp'], strategy: null },
      ],
      [
        'a one-element list stays a list',
        { provider: ['smtp'] },
        { provider: ['smtp'], strategy: null },
      ],
      [
        'a strategy alone',
        { strategy: 'round-robin' },
        { provider: null, strategy: 'round-robin' },
      ],
      [
        'a list and a strategy',
        { provider: ['smtp', 'provider-a-api'], strategy: 'free-first' },
        { provider: ['smtp', 'provider-a-api'], strategy: 'free-first' },
      ],
      ['explicit nulls', { provider: null, strategy: null }, { provider: null, strategy: null }],
      ['an empty routing object', {}, { provider: null, strategy: null }],
      ['routing: null', null, { provider: null, strategy: null }],
    ];
    for (const [what, routing, echoed] of cases) {
      test(`${what} is echoed as ${JSON.stringify(echoed)}`, async () => {
        const res = await post(p.production, '/v1/send', {
          key: r.liveKey,
          json: validMessage({ routing }),
        });
        assert.equal(res.status, 202, res.text);
        assert.deepEqual(
          res.body,
          expected202(res, { status: 'queued', project_id: r.project.id, routing: echoed }),
        );
      });
    }

    test('routing is echoed on the sandbox too', async () => {
      const res = await post(p.sandbox, '/v1/send', {
        key: r.testKey,
        json: validMessage({ routing: { provider: 'smtp', strategy: 'random' } }),
      });
      assert.equal(res.status, 202, res.text);
      assert.deepEqual(
        res.body,
        expected202(res, {
          status: 'captured',
          project_id: r.project.id,
          routing: { provider: 'smtp', strategy: 'random' },
        }),
      );
    });
  });

  test('the spooled file carries Message-ID at the from domain, Subject, To and Cc, but never Bcc', async () => {
    const res = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: validMessage({
        from: { name: 'Billing', email: 'billing@mail.shop.example' },
        to: ['Ann <ann@example.org>', 'bob@example.org'],
        cc: 'carol@example.org',
        bcc: [
          'hidden-one@secret.example',
          { email: 'hidden-two@secret.example', name: 'Hidden Two' },
        ],
        subject: 'Your invoice',
      }),
    });
    assert.equal(res.status, 202);
    const id = res.body.id as string;
    await assertStored(res, 'queued', {
      subject: 'Your invoice',
      to: 'ann@example.org',
      fromDomain: 'mail.shop.example',
    });
    const { headers } = await spooledHeaders(id);
    assert.ok(headerValues(headers, 'To')[0].includes('bob@example.org'));
    assert.deepEqual(headerValues(headers, 'Cc'), ['carol@example.org']);
    assert.deepEqual(headerValues(headers, 'Bcc'), []);
    assert.ok(!headers.includes('hidden-one@secret.example'), 'bcc address absent from headers');
    assert.ok(!headers.includes('hidden-two@secret.example'), 'bcc address absent from headers');
    assert.ok(!headers.includes('Hidden Two'), 'bcc name absent from headers');
    assert.ok(!headers.includes('secret.example'), 'bcc domain absent from headers');
    const recipients = JSON.parse((await row(id))!.recipients) as {
      to: string[];
      cc: string[];
      bcc: string[];
    };
    assert.deepEqual(recipients, {
      to: ['ann@example.org', 'bob@example.org'],
      cc: ['carol@example.org'],
      bcc: ['hidden-one@secret.example', 'hidden-two@secret.example'],
    });
  });

  test('a captured sandbox message also keeps its bcc in the row and out of the headers', async () => {
    const res = await post(p.sandbox, '/v1/send', {
      key: proj.testKey,
      json: validMessage({ bcc: 'audit@archive.example' }),
    });
    assert.equal(res.status, 202);
    const { headers } = await spooledHeaders(res.body.id);
    assert.ok(!headers.includes('audit@archive.example'));
    assert.deepEqual(JSON.parse((await row(res.body.id))!.recipients).bcc, [
      'audit@archive.example',
    ]);
  });

  describe('operator release and cancel', () => {
    test('releasing a captured sandbox message queues it', async () => {
      const res = await post(p.sandbox, '/v1/send', { key: proj.testKey, json: validMessage() });
      assert.equal((await row(res.body.id))!.status, 'captured');
      const released = await releaseMessage(p.ctx, res.body.id);
      assert.equal(released.status, 'queued');
      assert.equal(released.paused, false);
      assert.equal((await row(res.body.id))!.status, 'queued');
    });

    test('releasing a request-paused message queues it; with a future scheduled_at it becomes scheduled', async () => {
      const a = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ paused: true }),
      });
      assert.equal((await releaseMessage(p.ctx, a.body.id)).status, 'queued');
      assert.equal((await row(a.body.id))!.status, 'queued');
      assert.equal((await row(a.body.id))!.hold_reason, null);

      const b = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ paused: true, scheduled_at: instantWithOffset(HOUR, '+02:00') }),
      });
      assert.equal((await releaseMessage(p.ctx, b.body.id)).status, 'scheduled');
      assert.equal((await row(b.body.id))!.status, 'scheduled');
    });

    test('releasing a queued message is a conflict', async () => {
      const res = await post(p.production, '/v1/send', { key: proj.liveKey, json: validMessage() });
      await assert.rejects(
        async () => releaseMessage(p.ctx, res.body.id),
        (err: unknown) => err instanceof OperatorError && err.code === 'conflict',
      );
      assert.equal((await row(res.body.id))!.status, 'queued');
    });

    test('releasing a message held by a still-paused project is a conflict', async () => {
      const q = await createProjectWithKeys(p.ctx, 'still paused');
      await setPaused(p.ctx, q.project.id, true);
      const res = await post(p.production, '/v1/send', { key: q.liveKey, json: validMessage() });
      await assert.rejects(
        async () => releaseMessage(p.ctx, res.body.id),
        (err: unknown) => err instanceof OperatorError && err.code === 'conflict',
      );
      assert.equal((await row(res.body.id))!.status, 'paused');
    });

    test('cancelling a queued message cancels it; cancelling it again is a conflict', async () => {
      const res = await post(p.production, '/v1/send', { key: proj.liveKey, json: validMessage() });
      const cancelled = await cancelMessage(p.ctx, res.body.id);
      assert.equal(cancelled.status, 'cancelled');
      assert.equal((await row(res.body.id))!.status, 'cancelled');
      await assert.rejects(
        async () => cancelMessage(p.ctx, res.body.id),
        (err: unknown) => err instanceof OperatorError && err.code === 'conflict',
      );
      await assert.rejects(
        async () => releaseMessage(p.ctx, res.body.id),
        (err: unknown) => err instanceof OperatorError && err.code === 'conflict',
      );
      assert.equal((await row(res.body.id))!.status, 'cancelled');
    });

    test('scheduled, paused and captured messages can be cancelled', async () => {
      const scheduled = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ scheduled_at: instantWithOffset(HOUR, '+02:00') }),
      });
      const paused = await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ paused: true }),
      });
      const captured = await post(p.sandbox, '/v1/send', {
        key: proj.testKey,
        json: validMessage(),
      });
      for (const res of [scheduled, paused, captured]) {
        assert.equal((await cancelMessage(p.ctx, res.body.id)).status, 'cancelled');
        assert.equal((await row(res.body.id))!.status, 'cancelled');
      }
    });

    test('release and cancel of an unknown id are not_found', async () => {
      await assert.rejects(
        async () => releaseMessage(p.ctx, 'm.00000000000000000000000000'),
        (err: unknown) => err instanceof OperatorError && err.code === 'not_found',
      );
      await assert.rejects(
        async () => cancelMessage(p.ctx, 'm.00000000000000000000000000'),
        (err: unknown) => err instanceof OperatorError && err.code === 'not_found',
      );
    });
  });

  describe('non-send routes', () => {
    test("GET /healthz answers 200 with each listener's environment", async () => {
      const prod = await get(p.production, '/healthz');
      assert.equal(prod.status, 200);
      assert.deepEqual(prod.body, { status: 'ok', environment: 'production' });
      const sandbox = await get(p.sandbox, '/healthz');
      assert.equal(sandbox.status, 200);
      assert.deepEqual(sandbox.body, { status: 'ok', environment: 'sandbox' });
    });

    test('GET /openapi.json serves the OpenAPI 3.1.0 contract version 1.0.0 on both listeners', async () => {
      for (const base of [p.production, p.sandbox]) {
        const res = await get(base, '/openapi.json');
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
        assert.equal(res.body.openapi, '3.1.0');
        assert.equal(res.body.info.version, '1.0.0');
      }
    });

    test('GET /v1/send and GET /v1/send/batch are 405 with Allow: POST', async () => {
      for (const base of [p.production, p.sandbox]) {
        for (const pathname of ['/v1/send', '/v1/send/batch']) {
          const res = await get(base, pathname);
          assert.equal(res.status, 405);
          assert.equal(res.headers.get('allow'), 'POST');
          assert.deepEqual(res.body, {
            error: {
              type: 'api_error',
              code: 'method_not_allowed',
              message: res.body.error.message,
            },
          });
        }
      }
    });

    test('an unknown path is a 404 error envelope', async () => {
      for (const base of [p.production, p.sandbox]) {
        const res = await get(base, '/v2/send');
        assert.equal(res.status, 404);
        assert.deepEqual(res.body, {
          error: { type: 'api_error', code: 'not_found', message: res.body.error.message },
        });
        const posted = await post(base, '/v1/nowhere', { key: proj.liveKey, json: validMessage() });
        assert.equal(posted.status, 404);
        assert.deepEqual(posted.body, {
          error: { type: 'api_error', code: 'not_found', message: posted.body.error.message },
        });
      }
    });
  });
});
