/**
 * Outbound lifecycle webhooks (issue 7) against REAL HTTP receivers on 127.0.0.1 (so these
 * suites set `webhooks.allow_private_targets`, except where the default refusal is the point).
 * Every signature is checked here with node:crypto over the raw bytes received, independently of
 * the project's own helper. Time-dependent rules (the ladder, Retry-After, the 24-hour disable,
 * the rotation grace) run on a ManualClock while the dispatcher polls on real timers.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { describe, test } from 'node:test';
import { generate } from 'selfsigned';
import { SMTPServer } from 'smtp-server';
import { ManualClock } from '../../src/clock.js';
import { applyFeedback } from '../../src/delivery/feedback.js';
import { type CpuReading, readCpu, SaturationBudget } from '../../src/events/cpuBudget.js';
import { MAIL_EVENT_TYPES } from '../../src/events/envelope.js';
import { retryDelayMs } from '../../src/events/ladder.js';
import { WebhookSender } from '../../src/events/sender.js';
import {
  nonPublicReason,
  parseTargetUrl,
  type Resolver,
  resolveTarget,
  TargetError,
} from '../../src/events/targets.js';
import { silentLogger } from '../../src/log.js';
import { OperatorError } from '../../src/operator/errors.js';
import { releaseMessage } from '../../src/operator/messages.js';
import { attachProvider } from '../../src/operator/providers.js';
import { suppress } from '../../src/operator/suppressions.js';
import { testWebhook } from '../../src/operator/webhookDeliveries.js';
import {
  addWebhook,
  enableWebhook,
  listWebhooks,
  removeWebhook,
  rotateWebhookSecret,
  type WebhookView,
} from '../../src/operator/webhookEndpoints.js';
import { linuxAddon } from '../../src/platform/linuxAddon.js';
import { type EventType, insertEvent } from '../../src/store/events.js';
import { listProviderAccounts } from '../../src/store/providerAccounts.js';
import { getValue } from '../../src/store/queries.js';
import type { WebhookDeliveryRow } from '../../src/store/webhookDeliveries.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  runCli,
  startTestPostern,
  type TestPostern,
  tempStateDir,
  validMessage,
} from '../support/postern.js';
import { dispatcherProbe } from '../support/probes.js';
import { gate, HANG_GUARD_MS, scope, settle, waitFor } from '../support/waiting.js';
import { type ReceivedWebhook, WebhookReceiver } from '../support/webhookReceiver.js';

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const HOUR = 3600_000;
const iso = (ms: number) => new Date(ms).toISOString();
const DEFAULT_LADDER = [60, 600, 3600, 7200, 21600];

type Scope = ReturnType<typeof scope>;

/** The scheduling policy of every thread of a process (field 41 of /proc/PID/task/TID/stat). */
function threadPolicies(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
      // Fields after the command name, which is in parentheses and may hold spaces.
      return [Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38])];
    } catch {
      return [];
    }
  });
}
async function receiver(
  s: Scope,
  opts: Parameters<typeof WebhookReceiver.start>[0] = {},
): Promise<WebhookReceiver> {
  return s.add(await WebhookReceiver.start(opts), (r) => r.close());
}

async function startPostern(
  s: Scope,
  opts: {
    clock?: ManualClock;
    webhooks?: Record<string, unknown>;
    delivery?: Record<string, unknown>;
  } = {},
): Promise<TestPostern> {
  const p = await startTestPostern({
    clock: opts.clock,
    config: {
      // Full priority and no CPU budget for the dispatcher thread here (a busy test run need not
      // starve it for these tests to hold, but they finish sooner); the defaults (SCHED_IDLE, 0.05
      // core when saturated) are used by the every-event-type test and the crash test.
      webhooks: {
        allow_private_targets: true,
        poll_interval_ms: 20,
        nice: 0,
        saturated_cpu_share: 64,
        ...opts.webhooks,
      },
      ...(opts.delivery ? { delivery: { poll_interval_ms: 30, ...opts.delivery } } : {}),
    },
  });
  return s.add(p, (x) => x.close());
}

async function send(
  p: TestPostern,
  pk: ProjectWithKeys,
  overrides: Record<string, unknown> = {},
): Promise<string> {
  const res = await post(p.production, '/v1/send', {
    key: pk.liveKey,
    json: validMessage(overrides),
  });
  assert.equal(res.status, 202, res.text);
  return res.body.id as string;
}

/**
 * The signature check a receiver does, written here with node:crypto alone: `t=<unix>` then one
 * `v1=<hex>` per secret, in the order given, each the HMAC-SHA256 of `<t>.<raw body>`. `t` is the
 * time of signing: the second of `fromMs` on a ManualClock, else a second between `fromMs` (read
 * before the delivery could be made) and `toMs` (read after it arrived).
 */
function assertSigned(
  hook: ReceivedWebhook,
  secrets: string[],
  fromMs: number,
  toMs = fromMs,
): number {
  const header = hook.headers['x-service-signature'];
  assert.equal(typeof header, 'string', 'X-Service-Signature is present');
  const m = /^t=(\d+)((?:,v1=[0-9a-f]{64})+)$/.exec(header as string);
  assert.ok(m, `signature header shape: ${header}`);
  const t = Number(m[1]);
  const [from, to] = [Math.floor(fromMs / 1000), Math.floor(toMs / 1000)];
  assert.ok(
    t >= from && t <= to,
    `t=${t} is the time of signing (${from === to ? from : `${from} to ${to}`})`,
  );
  const v1 = m[2]
    .slice(1)
    .split(',')
    .map((x) => x.slice(3));
  const expected = secrets.map((secret) =>
    createHmac('sha256', Buffer.from(secret, 'utf8'))
      .update(Buffer.concat([Buffer.from(`${t}.`, 'ascii'), hook.raw]))
      .digest('hex'),
  );
  assert.deepEqual(
    v1,
    expected,
    'each v1 is the HMAC of "<t>.<raw body>" with the secrets in order',
  );
  return t;
}

/** Headers and envelope keys every delivery has. */
function assertEnvelope(hook: ReceivedWebhook): void {
  assert.equal(hook.method, 'POST');
  assert.equal(hook.headers['content-type'], 'application/json');
  assert.equal(Number(hook.headers['content-length']), hook.raw.length);
  assert.deepEqual(
    Object.keys(hook.body),
    ['id', 'type', 'created_at', 'data'],
    'no other top-level keys',
  );
  assert.match(hook.body.id, /^we\.[0-9a-z]{24}$/);
  assert.equal(hook.headers['x-service-delivery'], hook.body.id);
  assert.equal(hook.headers['x-service-event'], hook.body.type);
  assert.equal(
    hook.body.created_at,
    new Date(hook.body.created_at).toISOString(),
    'created_at is an ISO instant',
  );
  assert.equal(typeof hook.body.data, 'object');
  // The bytes are exactly the JSON of the envelope (what was signed is what was sent).
  assert.equal(hook.raw.toString('utf8'), JSON.stringify(hook.body));
}

/** Read through the suite's store (SQLite or PostgreSQL). */
async function deliveryRow(p: TestPostern, id: string): Promise<WebhookDeliveryRow> {
  return (await p.ctx.store.get<WebhookDeliveryRow>(
    'SELECT * FROM webhook_deliveries WHERE id = ?',
    id,
  ))!;
}

/** The delivery row once `ready` holds for it, else null (a waitFor condition). */
async function deliveryRowWhen(
  p: TestPostern,
  id: string,
  ready: (d: WebhookDeliveryRow) => boolean,
): Promise<WebhookDeliveryRow | null> {
  const d = await deliveryRow(p, id);
  return ready(d) ? d : null;
}

async function deliveriesOf(p: TestPostern, endpointId: string): Promise<WebhookDeliveryRow[]> {
  return p.ctx.store.all<WebhookDeliveryRow>(
    'SELECT * FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY seq',
    endpointId,
  );
}

const view = async (p: TestPostern, pk: ProjectWithKeys, id: string): Promise<WebhookView> =>
  (await listWebhooks(p.ctx, pk.project.id)).webhooks.find((w) => w.id === id)!;

/** A pro project with keys and the default unreachable provider (acceptance only). */
const project = async (p: TestPostern, name = 'webhooks') =>
  await createProjectWithKeys(p.ctx, name, 'pro');

/* ---- a next-hop SMTP relay for the delivery-driven events ---- */

interface SinkRules {
  rcpt?: (to: string) => { code: number; text: string } | null;
  data?: (raw: string) => { code: number; text: string } | null;
}

async function smtpSink(s: Scope, rules: SinkRules): Promise<number> {
  let n = 0;
  const err = (r: { code: number; text: string }) =>
    Object.assign(new Error(r.text), { responseCode: r.code });
  const server = new SMTPServer({
    logger: false,
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    closeTimeout: 500,
    onRcptTo(address, _session, cb) {
      const r = rules.rcpt?.(address.address) ?? null;
      cb(r ? err(r) : null);
    },
    onData(stream, _session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const r = rules.data?.(Buffer.concat(chunks).toString('latin1')) ?? null;
        if (r) return cb(err(r));
        cb(null, `OK queued as relay-${String(++n).padStart(4, '0')}`);
      });
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  s.add(server, (x) => new Promise<void>((resolve) => x.close(() => resolve())));
  return ((server as unknown as { server: net.Server }).server.address() as net.AddressInfo).port;
}

/* ------------------------------------------------------------------------------------------ */

describe('webhooks', { concurrency: true }, () => {
  /* The one test that waits out a real timeout (the default 10 s) runs alongside the others. */
  test('a receiver that has not answered when the default 10 s timeout runs out counts as a failure and is retried on the ladder', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(T0);
    const r = await receiver(s);
    // The first answer is held until the attempt is recorded as timed out: however long the
    // machine takes, it comes after the deadline.
    const held = gate();
    r.respond = (_req, n) => (n === 0 ? { status: 200, until: held.opened } : { status: 200 });
    const p = await startPostern(s, { clock });
    assert.equal(p.config.webhooks.timeout_ms, 10_000, 'the default timeout');
    const pk = await project(p);
    const hook = await addWebhook(p.ctx, pk.project.id, r.url());
    await send(p, pk);
    const [first] = await r.waitFor(1);
    const row = await waitFor(
      () => deliveryRowWhen(p, first.body.id, (d) => d.attempts === 1),
      HANG_GUARD_MS,
      'the first attempt to time out',
    );
    held.open();
    assert.equal(row.status, 'pending');
    assert.equal(row.last_status, null);
    assert.match(row.last_error!, /^timeout: no 2xx within 10000 ms$/);
    assert.ok(
      row.next_attempt_at! >= T0 + 54_000 && row.next_attempt_at! <= T0 + 66_000,
      'next attempt on the first ladder step',
    );
    assert.equal((await view(p, pk, hook.id)).failing_since, iso(T0));
    // The retry (same id) succeeds at once.
    clock.set(row.next_attempt_at!);
    const [, second] = await r.waitFor(2);
    assert.equal(second.body.id, first.body.id);
    await waitFor(
      async () => (await deliveryRow(p, first.body.id)).status === 'delivered',
      HANG_GUARD_MS,
      'delivered on the retry',
    );
    assert.equal((await deliveryRow(p, first.body.id)).attempts, 2);
  });

  /* The real CLI, in child processes, alongside the rest too. */
  test('the CLI: webhook add | list | rotate-secret | test | enable | remove, one JSON object each, errors with exit codes', async (t) => {
    const s = scope(t);
    const r = await receiver(s);
    const stateDir = s.add(tempStateDir('postern-webhook-cli-'), (dir) =>
      rmSync(dir, { recursive: true, force: true }),
    );
    const strict = path.join(stateDir, 'strict.json');
    const relaxed = path.join(stateDir, 'relaxed.json');
    writeFileSync(strict, JSON.stringify({}));
    writeFileSync(relaxed, JSON.stringify({ webhooks: { allow_private_targets: true } }));
    const cli = async (args: string[], config = relaxed, code = 0) => {
      const res = await runCli([...args, '--json'], {
        POSTERN_STATE_DIR: stateDir,
        POSTERN_CONFIG: config,
      });
      assert.equal(res.code, code, `${args.join(' ')}: ${res.stdout}${res.stderr}`);
      assert.ok(
        res.stdout.endsWith('\n') && !res.stdout.slice(0, -1).includes('\n'),
        `one line of JSON: ${res.stdout}`,
      );
      return res;
    };
    const projectId = (await cli(['project', 'create', '--name', 'CLI hooks'])).json.id as string;

    // Refused by the default config: the URL is http to loopback.
    const refused = await cli(
      ['webhook', 'add', '--project', projectId, '--url', r.url()],
      strict,
      1,
    );
    assert.equal(refused.json.error.code, 'invalid_argument');
    assert.match(
      refused.json.error.message,
      /^This URL cannot receive webhooks: webhook URLs must be https:\/\/; plain http:\/\/ is allowed only towards loopback or private addresses, and only when the config sets webhooks\.allow_private_targets\.$/,
    );
    const refusedTls = await cli(
      ['webhook', 'add', '--project', projectId, '--url', `https://127.0.0.1:${r.port}/hook`],
      strict,
      1,
    );
    assert.match(refusedTls.json.error.message, /127\.0\.0\.1, a loopback address/);

    const added = (await cli(['webhook', 'add', '--project', projectId, '--url', r.url()])).json;
    assert.match(added.id, /^wh\.[0-9a-z]{20}$/);
    assert.match(added.secret, /^whsec_[A-Za-z0-9]{43}$/);
    assert.deepEqual(
      { ...added, id: 'X', secret: 'S', created_at: 'C' },
      {
        id: 'X',
        project_id: projectId,
        url: r.url(),
        events: null,
        state: 'enabled',
        disabled_at: null,
        disabled_reason: null,
        failing_since: null,
        last_success_at: null,
        last_failure_at: null,
        previous_secret_expires_at: null,
        pending_deliveries: 0,
        failed_deliveries: 0,
        created_at: 'C',
        secret: 'S',
      },
    );
    const filtered = (
      await cli([
        'webhook',
        'add',
        '--project',
        projectId,
        '--url',
        r.url('/sent'),
        '--events',
        'mail.sent,mail.bounced',
      ])
    ).json;
    assert.deepEqual(filtered.events, ['mail.sent', 'mail.bounced']);

    const list = await cli(['webhook', 'list', '--project', projectId]);
    assert.deepEqual(
      list.json.webhooks.map((w: WebhookView) => w.id),
      [added.id, filtered.id],
    );
    assert.ok(
      !list.stdout.includes('whsec_') && !list.stdout.includes(added.secret),
      'list never prints a secret',
    );

    const rotated = (await cli(['webhook', 'rotate-secret', added.id])).json;
    assert.deepEqual(Object.keys(rotated), ['id', 'secret', 'previous_secret_expires_at']);
    assert.notEqual(rotated.secret, added.secret);

    const testFrom = Date.now();
    const tested = (await cli(['webhook', 'test', added.id])).json;
    assert.deepEqual(
      { ...tested, duration_ms: 0 },
      {
        id: tested.id,
        endpoint_id: added.id,
        type: 'webhook.test',
        delivered: true,
        status_code: 200,
        error: null,
        duration_ms: 0,
      },
    );
    const [hook] = await r.waitFor(1);
    assertEnvelope(hook);
    assert.equal(hook.body.id, tested.id);
    assertSigned(hook, [rotated.secret, added.secret], testFrom, Date.now());

    const enabled = (await cli(['webhook', 'enable', added.id])).json;
    assert.equal(enabled.state, 'enabled');
    assert.equal(enabled.resumed_deliveries, 0);

    assert.deepEqual((await cli(['webhook', 'remove', filtered.id])).json, {
      id: filtered.id,
      removed: true,
      cancelled_deliveries: 0,
    });
    assert.equal(
      (await cli(['webhook', 'test', filtered.id], relaxed, 1)).json.error.code,
      'not_found',
    );
    assert.equal(
      (await cli(['webhook', 'add', '--project', projectId], relaxed, 2)).json.error.code,
      'usage',
    );
    assert.equal(
      (
        await cli(
          ['webhook', 'add', '--project', projectId, '--url', r.url(), '--events', 'mail.nope'],
          relaxed,
          1,
        )
      ).json.error.code,
      'invalid_argument',
    );
    assert.deepEqual(
      (await cli(['webhook', 'list', '--project', projectId])).json.webhooks.map(
        (w: WebhookView) => w.id,
      ),
      [added.id],
    );
  });

  describe('the rest', { concurrency: 1 }, () => {
    describe('envelope, headers and signature', () => {
      test('every event type: real acceptance, relay outcomes and provider feedback, plus webhook.test', async (t) => {
        const s = scope(t);
        const startedAt = Date.now();
        const r = await receiver(s);
        const sinkPort = await smtpSink(s, {
          rcpt: (to) =>
            to.startsWith('bounce@') ? { code: 550, text: '5.1.1 No such user' } : null,
          data: (raw) =>
            /^Subject: Reject me/m.test(raw) ? { code: 554, text: '5.7.1 Message refused' } : null,
        });
        const p = await startPostern(s, {
          delivery: { enabled: true },
          webhooks: { nice: 'idle', saturated_cpu_share: 0.05 },
        });
        if (linuxAddon()) {
          // The dispatcher's thread runs SCHED_IDLE (policy 5 in /proc/…/task/*/stat), nothing else does.
          await waitFor(
            () => threadPolicies(process.pid).some((policy) => policy !== 0),
            HANG_GUARD_MS,
            'the webhook thread started',
          );
          assert.deepEqual(
            threadPolicies(process.pid).filter((policy) => policy !== 0),
            [5],
          );
        }
        const pk = await createProjectWithKeys(p.ctx, 'Events project', 'pro', { provider: false });
        await attachProvider(p.ctx, pk.project.id, {
          slug: 'smtp',
          host: '127.0.0.1',
          port: String(sinkPort),
          tls: 'none',
        });
        const account = (await listProviderAccounts(p.ctx.store, pk.project.id))[0];
        const hook = await addWebhook(p.ctx, pk.project.id, r.url());
        assert.match(hook.secret, /^whsec_[A-Za-z0-9]{43}$/);

        // mail.accepted + mail.sent, then delivered and complained from provider feedback.
        const sentId = await send(p, pk, {
          to: ['Ann <ann@example.org>', 'bob@example.org'],
          subject: 'Hello Ann',
          tags: ['welcome', 'v2'],
          metadata: { user_id: '42', plan: 'gold' },
        });
        // mail.bounced for one recipient, mail.sent for the other.
        const bouncedId = await send(p, pk, {
          to: ['bounce@example.org', 'ok@example.org'],
          subject: 'Half bounces',
        });
        // mail.failed: the relay refuses the message for good.
        const failedId = await send(p, pk, { subject: 'Reject me' });
        // mail.suppressed: held, the recipient suppressed meanwhile, then released.
        const suppressedId = await send(p, pk, {
          to: 'gone@example.org',
          subject: 'Held',
          paused: true,
        });
        await suppress(p.ctx, pk.project.id, 'gone@example.org', 'manual');
        await releaseMessage(p.ctx, suppressedId);

        const sentRow = await waitFor(
          () => r.on().find((h) => h.body.type === 'mail.sent' && h.body.data.mail.uid === sentId),
          HANG_GUARD_MS,
          'mail.sent',
        );
        const now = Date.now();
        const feedback = (kind: 'delivered' | 'complaint', key: string) =>
          applyFeedback(
            p.ctx.store,
            account,
            [
              {
                receiptKey: key,
                kind,
                providerMessageId: sentRow.body.data.provider_message_id,
                messageId: sentId,
                recipient: 'ann@example.org',
                occurredAt: now,
                detail: kind === 'complaint' ? { type: 'abuse' } : { reply: '250 2.0.0 Ok' },
              },
            ],
            now,
            silentLogger(),
          );
        assert.equal((await feedback('delivered', 'fb-1')).applied, 1);
        assert.equal((await feedback('complaint', 'fb-2')).applied, 1);
        const test1 = await testWebhook(p.ctx, hook.id);
        assert.equal(test1.delivered, true, test1.error ?? '');

        const expectTypes = [...MAIL_EVENT_TYPES, 'webhook.test'];
        await r.waitUntil(
          () => expectTypes.every((type) => r.on().some((h) => h.body.type === type)),
          HANG_GUARD_MS,
          'one delivery of every type',
        );
        // Every event of the outbox was delivered once, as its own envelope.
        await waitFor(
          async () =>
            (await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM events')) ===
            r.on().filter((h) => h.body.type !== 'webhook.test').length,
          HANG_GUARD_MS,
          'all events',
        );
        await waitFor(
          async () => (await deliveriesOf(p, hook.id)).every((d) => d.status === 'delivered'),
          HANG_GUARD_MS,
          'every outcome recorded',
        );
        const events = await p.ctx.store.all<{
          seq: number;
          message_id: string;
          type: string;
          created_at: number;
          data: string;
        }>('SELECT * FROM events ORDER BY seq');
        const project = { uid: pk.project.id, name: 'Events project' };
        const mailOf: Record<string, unknown> = {
          [sentId]: {
            uid: sentId,
            subject: 'Hello Ann',
            from: 'sender@example.com',
            to: ['ann@example.org', 'bob@example.org'],
            project,
            tags: ['welcome', 'v2'],
            metadata: { user_id: '42', plan: 'gold' },
          },
          [bouncedId]: {
            uid: bouncedId,
            subject: 'Half bounces',
            from: 'sender@example.com',
            to: ['bounce@example.org', 'ok@example.org'],
            project,
            tags: [],
            metadata: {},
          },
          [failedId]: {
            uid: failedId,
            subject: 'Reject me',
            from: 'sender@example.com',
            to: ['rcpt@example.org'],
            project,
            tags: [],
            metadata: {},
          },
          [suppressedId]: {
            uid: suppressedId,
            subject: 'Held',
            from: 'sender@example.com',
            to: ['gone@example.org'],
            project,
            tags: [],
            metadata: {},
          },
        };
        const seen = new Map<string, ReceivedWebhook>();
        for (const ev of events) {
          const hooks = r
            .on()
            .filter(
              (h) =>
                h.body.type === ev.type &&
                h.body.data.mail.uid === ev.message_id &&
                JSON.stringify(h.body.data) === ev.data,
            );
          assert.equal(hooks.length, 1, `${ev.type} of ${ev.message_id} delivered once`);
          const h = hooks[0];
          assertEnvelope(h);
          assertSigned(h, [hook.secret], startedAt, Date.now());
          assert.equal(h.body.created_at, iso(ev.created_at));
          assert.deepEqual(h.body.data, JSON.parse(ev.data), 'data is the event data as recorded');
          assert.deepEqual(h.body.data.mail, mailOf[ev.message_id], `${ev.type}: data.mail`);
          assert.equal((await deliveryRow(p, h.body.id)).status, 'delivered');
          seen.set(`${ev.type} ${ev.message_id}`, h);
        }
        const data = (type: EventType, id: string) => seen.get(`${type} ${id}`)?.body.data;
        // Type-specific blocks.
        assert.equal(data('mail.accepted', sentId).status, 'queued');
        assert.deepEqual(data('mail.sent', sentId).provider, 'smtp');
        assert.match(data('mail.sent', sentId).provider_message_id, /^relay-\d{4}$/);
        assert.deepEqual(Object.keys(data('mail.delivered', sentId).delivery).sort(), [
          'occurred_at',
          'provider',
          'provider_message_id',
          'recipient',
          'reply',
        ]);
        assert.equal(data('mail.delivered', sentId).delivery.recipient, 'ann@example.org');
        assert.equal(data('mail.complained', sentId).complaint.feedback_type, 'abuse');
        assert.equal(data('mail.bounced', bouncedId).bounce.recipient, 'bounce@example.org');
        assert.equal(data('mail.bounced', bouncedId).bounce.type, 'hard');
        assert.match(data('mail.bounced', bouncedId).bounce.reply, /550/);
        assert.ok(data('mail.sent', bouncedId), 'the other recipient was sent');
        assert.equal(data('mail.failed', failedId).failure.reason, 'rejected');
        assert.match(data('mail.failed', failedId).failure.message, /554/);
        assert.deepEqual(data('mail.suppressed', suppressedId).suppressed, {
          recipient: 'gone@example.org',
        });

        // webhook.test: the same envelope and signature, no data.mail.
        const testHook = r.on().find((h) => h.body.type === 'webhook.test')!;
        assertEnvelope(testHook);
        assertSigned(testHook, [hook.secret], startedAt, Date.now());
        assert.equal(testHook.body.id, test1.id);
        assert.equal('mail' in testHook.body.data, false);
        assert.deepEqual(testHook.body.data, { webhook: { id: hook.id, url: r.url() }, project });
        assert.equal(testHook.headers['user-agent'], 'Postern-Webhooks/1.0');
        const testRow = await deliveryRow(p, test1.id);
        assert.deepEqual(testRow, {
          ...testRow,
          status: 'delivered',
          attempts: 1,
          event_seq: null,
          type: 'webhook.test',
          last_status: 200,
        });
      });

      test('the events a project had before an endpoint was added are not sent to it; --events filters by type; other projects are not mixed in', async (t) => {
        const s = scope(t);
        const r = await receiver(s);
        const p = await startPostern(s);
        const looked = await dispatcherProbe(s, p);
        const pk = await project(p, 'first');
        const other = await project(p, 'second');
        const before = await send(p, pk, { subject: 'before' });
        await settle(100);
        const all = await addWebhook(p.ctx, pk.project.id, r.url('/all'));
        const sentOnly = await addWebhook(
          p.ctx,
          pk.project.id,
          r.url('/sent'),
          'mail.sent, mail.failed',
        );
        assert.deepEqual(sentOnly.events, ['mail.sent', 'mail.failed']);
        assert.equal(all.events, null);
        const after = await send(p, pk, { subject: 'after' });
        await send(p, other, { subject: 'other project' });
        // A mail.sent for `after`, recorded the way the scheduler records it.
        await insertEvent(p.ctx.store, {
          project_id: pk.project.id,
          message_id: after,
          type: 'mail.sent',
          created_at: Date.now(),
          data: JSON.stringify({
            mail: {
              uid: after,
              subject: 'after',
              from: 'sender@example.com',
              to: ['rcpt@example.org'],
              project: { uid: pk.project.id, name: 'first' },
              tags: [],
              metadata: {},
            },
            provider: 'smtp',
            provider_message_id: 'x1',
          }),
        });
        await r.waitFor(2, '/all');
        await r.waitFor(1, '/sent');
        // Nothing more: the dispatcher has looked again since, and sent nothing else here.
        await looked();
        assert.deepEqual(
          r
            .on('/all')
            .map((h) => `${h.body.type} ${h.body.data.mail.uid}`)
            .sort(),
          [`mail.accepted ${after}`, `mail.sent ${after}`],
        );
        assert.deepEqual(
          r.on('/sent').map((h) => [h.body.type, h.body.data.mail.uid]),
          [['mail.sent', after]],
        );
        assert.ok(
          !r.on().some((h) => h.body.data.mail.uid === before),
          'the earlier message is not delivered',
        );
        assert.ok(r.on().every((h) => h.body.data.mail.project.uid === pk.project.id));
        assert.ok(r.on('/all')[0].body.id !== r.on('/sent')[0].body.id);
      });
    });

    describe('retries', () => {
      test('500 then 200: the same we. id twice, the body identical, freshly signed', async (t) => {
        const s = scope(t);
        const clock = new ManualClock(T0);
        const r = await receiver(s);
        r.respond = (_req, n) =>
          n === 0 ? { status: 500, body: 'database is down\n' } : { status: 204 };
        const p = await startPostern(s, { clock });
        const pk = await project(p);
        const hook = await addWebhook(p.ctx, pk.project.id, r.url());
        const id = await send(p, pk);
        const [first] = await r.waitFor(1);
        const row = await waitFor(() => deliveryRowWhen(p, first.body.id, (d) => d.attempts === 1));
        assert.equal(row.status, 'pending');
        assert.equal(row.last_status, 500);
        assert.equal(row.last_error, 'HTTP 500: database is down');
        assert.equal((await view(p, pk, hook.id)).failing_since, iso(T0));
        clock.advance(row.next_attempt_at! - T0);
        const [, second] = await r.waitFor(2);
        assert.equal(second.body.id, first.body.id, 'same delivery id');
        assert.equal(second.headers['x-service-delivery'], first.headers['x-service-delivery']);
        assert.ok(second.raw.equals(first.raw), 'the same envelope bytes');
        assertSigned(first, [hook.secret], T0);
        assertSigned(second, [hook.secret], clock.now());
        assert.notEqual(
          first.headers['x-service-signature'],
          second.headers['x-service-signature'],
          'signed again at the new time',
        );
        assert.equal(first.body.data.mail.uid, id);
        await waitFor(async () => (await deliveryRow(p, first.body.id)).status === 'delivered');
        const done = await deliveryRow(p, first.body.id);
        assert.equal(done.attempts, 2);
        assert.equal(done.last_status, 204);
        assert.equal(done.last_error, null);
        const v = await view(p, pk, hook.id);
        assert.equal(v.failing_since, null, 'a success ends the failure run');
        assert.equal(v.last_success_at, iso(clock.now()));
      });

      test('a 302 is a failure: the redirect is not followed', async (t) => {
        const s = scope(t);
        const r = await receiver(s);
        r.respond = (req) =>
          req.path === '/hook'
            ? { status: 302, headers: { location: r.url('/elsewhere') } }
            : { status: 200 };
        const p = await startPostern(s);
        const pk = await project(p);
        await addWebhook(p.ctx, pk.project.id, r.url());
        await send(p, pk);
        const [first] = await r.waitFor(1, '/hook');
        const row = await waitFor(() => deliveryRowWhen(p, first.body.id, (d) => d.attempts === 1));
        // A redirect followed would have been requested within the attempt, before its outcome.
        assert.equal(r.on('/elsewhere').length, 0, 'the Location was not requested');
        assert.equal(row.status, 'pending');
        assert.equal(row.last_status, 302);
        assert.equal(
          row.last_error,
          `HTTP 302: redirects are not followed; Location: ${r.url('/elsewhere')}`,
        );
        const wait = row.next_attempt_at! - row.last_attempt_at!;
        assert.ok(
          wait >= 54_000 && wait <= 66_000,
          `waits on the ladder's first step (${wait} ms)`,
        );
      });

      test('the full ladder: six attempts over about nine hours, jittered, then failed; nothing after', async (t) => {
        const s = scope(t);
        const clock = new ManualClock(T0);
        const r = await receiver(s);
        r.respond = () => ({ status: 503, body: 'maintenance' });
        const p = await startPostern(s, { clock });
        const looked = await dispatcherProbe(s, p);
        assert.deepEqual(p.config.webhooks.retry_ladder_seconds, DEFAULT_LADDER);
        assert.equal(p.config.webhooks.retry_jitter, 0.1);
        const pk = await project(p);
        await addWebhook(p.ctx, pk.project.id, r.url());
        await send(p, pk);
        const [first] = await r.waitFor(1);
        const id = first.body.id as string;
        const attemptTimes = [clock.now()];
        for (let i = 1; i <= 5; i++) {
          const row = await waitFor(
            () => deliveryRowWhen(p, id, (d) => d.attempts === i),
            HANG_GUARD_MS,
            `attempt ${i} recorded`,
          );
          assert.equal(row.status, 'pending');
          const wait = row.next_attempt_at! - row.last_attempt_at!;
          const step = DEFAULT_LADDER[i - 1] * 1000;
          assert.ok(
            wait >= step * 0.9 && wait <= step * 1.1,
            `wait after attempt ${i}: ${wait} ms within ±10% of ${step}`,
          );
          // Not before its time: a cycle at one second before it leaves it unclaimed.
          clock.set(row.next_attempt_at! - 1000);
          await looked();
          assert.equal(r.on().length, i, `no attempt ${i + 1} before its time`);
          assert.equal(
            (await deliveryRow(p, id)).next_attempt_at,
            row.next_attempt_at,
            'not claimed',
          );
          clock.set(row.next_attempt_at!);
          await r.waitFor(i + 1);
          attemptTimes.push(clock.now());
        }
        const last = await waitFor(() => deliveryRowWhen(p, id, (d) => d.attempts === 6));
        assert.equal(last.status, 'failed');
        assert.equal(last.next_attempt_at, null);
        assert.equal(last.completed_at, attemptTimes[5]);
        assert.equal(last.last_error, 'HTTP 503: maintenance');
        assert.ok(
          r.on().every((h) => h.body.id === id),
          'one delivery id throughout',
        );
        const total = (attemptTimes[5] - attemptTimes[0]) / HOUR;
        assert.ok(total > 8.2 && total < 10.2, `six attempts over ${total.toFixed(2)} h`);
        t.diagnostic(
          `attempts at +${attemptTimes.map((x) => ((x - T0) / 60_000).toFixed(1)).join(', +')} min`,
        );
        clock.advance(48 * HOUR);
        await looked();
        assert.equal(r.on().length, 6, 'nothing after the sixth attempt');
      });

      test('a configured ladder of zero waits retries at once, then fails after its last attempt', async (t) => {
        const s = scope(t);
        const r = await receiver(s);
        r.respond = () => ({ status: 500 });
        const p = await startPostern(s, {
          webhooks: { retry_ladder_seconds: [0, 0], retry_jitter: 0 },
        });
        const looked = await dispatcherProbe(s, p);
        const pk = await project(p);
        await addWebhook(p.ctx, pk.project.id, r.url());
        await send(p, pk);
        const hooks = await r.waitFor(3);
        const row = await waitFor(
          () => deliveryRowWhen(p, hooks[0].body.id, (d) => d.status === 'failed'),
          HANG_GUARD_MS,
          'failed',
        );
        assert.equal(row.attempts, 3);
        await looked();
        assert.equal(r.on().length, 3);
        assert.ok(hooks.every((h) => h.body.id === hooks[0].body.id));
      });

      test('Retry-After on 429 and 503 moves the next attempt later (seconds or HTTP date), capped at the longest step', async (t) => {
        const s = scope(t);
        const clock = new ManualClock(T0);
        const r = await receiver(s);
        r.respond = (req) =>
          req.path === '/seconds'
            ? { status: 503, headers: { 'retry-after': '1800' } }
            : req.path === '/date'
              ? { status: 429, headers: { 'retry-after': new Date(T0 + 2 * HOUR).toUTCString() } }
              : req.path === '/huge'
                ? { status: 429, headers: { 'retry-after': '999999' } }
                : req.path === '/small'
                  ? { status: 429, headers: { 'retry-after': '5' } }
                  : { status: 500, headers: { 'retry-after': '3000' } };
        const p = await startPostern(s, { clock });
        const pk = await project(p);
        const paths = ['/seconds', '/date', '/huge', '/small', '/ignored'];
        for (const path of paths) await addWebhook(p.ctx, pk.project.id, r.url(path));
        await send(p, pk);
        await r.waitFor(5);
        const rows = await waitFor(async () => {
          const all = await Promise.all(paths.map((path) => deliveryRow(p, r.on(path)[0].body.id)));
          return all.every((x) => x.attempts === 1) ? all : null;
        });
        const waits = Object.fromEntries(
          paths.map((path, i) => [
            path,
            (rows[i].next_attempt_at! - rows[i].last_attempt_at!) / 1000,
          ]),
        );
        assert.equal(waits['/seconds'], 1800, '503 Retry-After: 1800');
        assert.equal(waits['/date'], 7200, '429 Retry-After as an HTTP date');
        assert.equal(waits['/huge'], 21600, 'capped at the longest ladder step');
        assert.ok(waits['/small'] >= 54 && waits['/small'] <= 66, 'never earlier than the ladder');
        assert.ok(
          waits['/ignored'] >= 54 && waits['/ignored'] <= 66,
          'Retry-After only counts on 429 and 503',
        );
      });
    });

    describe('endpoint health', () => {
      test('an endpoint failing for 24 hours is disabled (list shows why and since when); a success in between resets the clock; enable resumes its pending deliveries', async (t) => {
        const s = scope(t);
        const clock = new ManualClock(T0);
        const r = await receiver(s);
        let healthy = new Set<string>();
        r.respond = (req) =>
          healthy.has(req.path) ? { status: 200 } : { status: 500, body: 'broken' };
        // One retry, about 27.8 h after the first attempt: out of the way of this timeline until re-enabling.
        const p = await startPostern(s, { clock, webhooks: { retry_ladder_seconds: [100_000] } });
        const looked = await dispatcherProbe(s, p);
        assert.equal(p.config.webhooks.disable_after_seconds, 86_400);
        const pk = await project(p);
        const a = await addWebhook(p.ctx, pk.project.id, r.url('/a'));
        const b = await addWebhook(p.ctx, pk.project.id, r.url('/b'));
        /** At `at`, one message; waits until each endpoint named has had its attempt recorded. */
        const round = async (at: number, label: string, paths = ['/a', '/b']): Promise<string> => {
          clock.set(at);
          const id = await send(p, pk, { subject: label });
          for (const path of paths) {
            const hook = await waitFor(
              () => r.on(path).find((h) => h.body.data.mail.uid === id),
              HANG_GUARD_MS,
              `${label} on ${path}`,
            );
            await waitFor(
              async () => (await deliveryRow(p, hook.body.id)).attempts === 1,
              HANG_GUARD_MS,
              `${label} on ${path} recorded`,
            );
          }
          return id;
        };
        await round(T0, 'at 0 h');
        assert.equal((await view(p, pk, a.id)).failing_since, iso(T0));
        assert.equal((await view(p, pk, b.id)).failing_since, iso(T0));
        // 20 h later /b answers once; /a keeps failing.
        healthy = new Set(['/b']);
        await round(T0 + 20 * HOUR, 'at 20 h');
        healthy = new Set();
        assert.equal((await view(p, pk, b.id)).failing_since, null, 'a success ends the run');
        assert.equal((await view(p, pk, b.id)).last_success_at, iso(T0 + 20 * HOUR));
        assert.equal((await view(p, pk, a.id)).failing_since, iso(T0));
        // One minute short of 24 h: still enabled.
        await round(T0 + 24 * HOUR - 60_000, 'at 24 h - 1 min');
        assert.equal((await view(p, pk, a.id)).state, 'enabled');
        // The first failure once 24 h have passed disables /a.
        const disabledAt = T0 + 24 * HOUR + 60_000;
        await round(disabledAt, 'at 24 h + 1 min');
        const va = await view(p, pk, a.id);
        assert.equal(va.state, 'disabled');
        assert.equal(va.disabled_at, iso(disabledAt));
        assert.equal(
          va.disabled_reason,
          `every attempt failed for 24 h (since ${iso(T0)}); last: HTTP 500: broken`,
        );
        assert.equal(va.failing_since, iso(T0));
        const vb = await view(p, pk, b.id);
        assert.equal(vb.state, 'enabled', '/b succeeded at 20 h, so its run began at 24 h - 1 min');
        assert.equal(vb.disabled_at, null);
        assert.equal(vb.disabled_reason, null);
        assert.equal(vb.failing_since, iso(T0 + 24 * HOUR - 60_000));

        // Disabled: new events are kept for /a and nothing is attempted, even once retries fall due.
        const aFrozen = r.on('/a').length;
        const queued = await round(T0 + 31 * HOUR, 'while disabled', ['/b']);
        await looked();
        assert.equal(r.on('/a').length, aFrozen, 'nothing sent to a disabled endpoint');
        const pendingA = (await deliveriesOf(p, a.id)).filter((d) => d.status === 'pending');
        assert.equal(pendingA.length, 5, 'four waiting for their retry, one never tried');
        assert.equal((await view(p, pk, a.id)).pending_deliveries, 5);

        // Fixed and re-enabled: every pending delivery goes out at once, without waiting for its retry time.
        healthy = new Set(['/a', '/b']);
        const enabled = await enableWebhook(p.ctx, a.id);
        assert.equal(enabled.state, 'enabled');
        assert.equal(enabled.disabled_at, null);
        assert.equal(enabled.disabled_reason, null);
        assert.equal(enabled.failing_since, null);
        assert.equal(enabled.resumed_deliveries, 5);
        await waitFor(
          async () => (await deliveriesOf(p, a.id)).every((d) => d.status === 'delivered'),
          HANG_GUARD_MS,
          'the pending deliveries of /a',
        );
        assert.ok(
          r.on('/a').some((h) => h.body.data.mail.uid === queued),
          'the event recorded while disabled arrived',
        );
        assert.equal((await view(p, pk, a.id)).pending_deliveries, 0);
        assert.equal((await view(p, pk, a.id)).last_success_at, iso(T0 + 31 * HOUR));
      });

      test('a slow endpoint holds only its own slots: another endpoint is served meanwhile', async (t) => {
        const s = scope(t);
        const slow = await receiver(s);
        const fast = await receiver(s);
        // The slow endpoint answers nothing until the fast one has had all 9: its slots stay taken
        // however long that takes (and the timeout, 10 minutes here, never frees them).
        const stalled = gate();
        slow.respond = () => ({ status: 200, until: stalled.opened });
        const p = await startPostern(s, {
          webhooks: { per_endpoint_concurrency: 3, timeout_ms: 600_000 },
        });
        const pk = await project(p);
        await addWebhook(p.ctx, pk.project.id, slow.url());
        await addWebhook(p.ctx, pk.project.id, fast.url());
        const res = await post(p.production, '/v1/send/batch', {
          key: pk.liveKey,
          json: {
            messages: Array.from({ length: 9 }, (_, i) => validMessage({ subject: `m${i}` })),
          },
        });
        assert.equal(res.status, 207);
        const fastOnes = await fast.waitFor(9);
        assert.equal(
          slow.on().length,
          3,
          'the slow endpoint has its 3 slots taken, and nothing more',
        );
        assert.equal(
          slow.maxInFlight.get('/hook'),
          3,
          'at most per_endpoint_concurrency requests at once to one endpoint',
        );
        stalled.open();
        const slowOnes = await slow.waitFor(9);
        assert.equal(slow.maxInFlight.get('/hook'), 3);
        assert.ok(
          fastOnes.every((h) => h.arrival < slowOnes[3].arrival),
          `the fast endpoint's 9 arrived before the slow endpoint's 4th (arrivals ${fastOnes.map((h) => h.arrival).join(', ')}; the slow one's 4th: ${slowOnes[3].arrival})`,
        );
      });

      test('remove: nothing more is sent, pending deliveries end failed', async (t) => {
        const s = scope(t);
        const clock = new ManualClock(T0);
        const r = await receiver(s);
        r.respond = () => ({ status: 500 });
        const p = await startPostern(s, { clock });
        const looked = await dispatcherProbe(s, p);
        const pk = await project(p);
        const hook = await addWebhook(p.ctx, pk.project.id, r.url());
        await send(p, pk);
        const [first] = await r.waitFor(1);
        await waitFor(async () => (await deliveryRow(p, first.body.id)).attempts === 1);
        assert.deepEqual(await removeWebhook(p.ctx, hook.id), {
          id: hook.id,
          removed: true,
          cancelled_deliveries: 1,
        });
        assert.deepEqual((await listWebhooks(p.ctx, pk.project.id)).webhooks, []);
        const row = await deliveryRow(p, first.body.id);
        assert.equal(row.status, 'failed');
        assert.equal(row.last_error, 'endpoint removed');
        clock.advance(HOUR);
        await send(p, pk);
        await looked();
        assert.equal(r.on().length, 1);
        await assert.rejects(
          async () => removeWebhook(p.ctx, hook.id),
          (e: unknown) => e instanceof OperatorError && e.code === 'not_found',
        );
      });
    });

    describe('secrets', () => {
      test('rotate-secret: two v1 entries (new, then old) during the grace period, then only the new one', async (t) => {
        const s = scope(t);
        const clock = new ManualClock(T0);
        const r = await receiver(s);
        const p = await startPostern(s, { clock });
        const pk = await project(p);
        const hook = await addWebhook(p.ctx, pk.project.id, r.url());
        await send(p, pk);
        const [one] = await r.waitFor(1);
        assertSigned(one, [hook.secret], clock.now());

        clock.advance(60_000);
        const rotated = await rotateWebhookSecret(p.ctx, hook.id);
        assert.match(rotated.secret, /^whsec_[A-Za-z0-9]{43}$/);
        assert.notEqual(rotated.secret, hook.secret);
        assert.equal(rotated.previous_secret_expires_at, iso(clock.now() + 24 * HOUR));
        assert.equal(
          (await view(p, pk, hook.id)).previous_secret_expires_at,
          rotated.previous_secret_expires_at,
        );
        assert.ok(
          !JSON.stringify(await listWebhooks(p.ctx, pk.project.id)).includes('whsec_'),
          'list never shows a secret',
        );
        await send(p, pk);
        const [, two] = await r.waitFor(2);
        assertSigned(two, [rotated.secret, hook.secret], clock.now());

        clock.advance(24 * HOUR + 1000);
        assert.equal((await view(p, pk, hook.id)).previous_secret_expires_at, null);
        await send(p, pk);
        const [, , three] = await r.waitFor(3);
        assertSigned(three, [rotated.secret], clock.now());
      });
    });

    describe('targets', () => {
      test('loopback and private targets are refused by default, with a clear error; https only', async (t) => {
        const s = scope(t);
        const r = await receiver(s);
        const p = await startPostern(s, { webhooks: { allow_private_targets: false } });
        const pk = await project(p);
        const refused = async (url: string, pattern: RegExp) => {
          await assert.rejects(addWebhook(p.ctx, pk.project.id, url), (e: unknown) => {
            assert.ok(e instanceof OperatorError, String(e));
            assert.equal(e.code, 'invalid_argument');
            assert.match(e.message, pattern);
            return true;
          });
        };
        await refused(r.url(), /must be https:\/\//);
        await refused(
          `https://127.0.0.1:${r.port}/hook`,
          /127\.0\.0\.1, a loopback address: webhooks go to public addresses only \(set webhooks\.allow_private_targets/,
        );
        await refused(
          'https://localhost/hook',
          /localhost resolves to (127\.0\.0\.1|::1), a loopback address/,
        );
        await refused('https://[::1]/hook', /::1, a loopback address/);
        await refused('https://[::ffff:127.0.0.1]/hook', /loopback \(IPv4-mapped\)/);
        await refused('https://[::ffff:a9fe:a9fe]/latest/meta-data', /link-local \(IPv4-mapped\)/);
        await refused('https://169.254.169.254/latest/meta-data', /link-local/);
        await refused('https://10.1.2.3/', /private/);
        await refused('https://172.16.0.1/', /private/);
        await refused('https://192.168.1.1/', /private/);
        await refused('https://100.64.0.1/', /carrier-grade NAT/);
        await refused('https://0.0.0.0/', /unspecified/);
        await refused('https://[::]/', /unspecified/);
        await refused('https://[fd12:3456::1]/', /unique local/);
        await refused('https://[fe80::1]/', /link-local/);
        await refused('https://224.0.0.1/', /multicast/);
        await refused('https://[ff02::1]/', /multicast/);
        await refused('https://2130706433/', /loopback/); // 127.0.0.1 as one number: URL parsing normalises it
        await refused('ftp://example.com/', /must be https:\/\//);
        await refused('https://user:pw@example.com/', /credentials/);
        await refused('not a url', /not an absolute URL/);
        assert.deepEqual((await listWebhooks(p.ctx, pk.project.id)).webhooks, []);
      });

      test('checked again at delivery: an endpoint registered while private targets were allowed gets nothing once they are not', async (t) => {
        const s = scope(t);
        const r = await receiver(s);
        const p = await startPostern(s, { webhooks: { allow_private_targets: false } });
        const pk = await project(p);
        // Registered under a config that allowed it (say, before the operator changed it).
        const hook = await addWebhook(
          {
            ...p.ctx,
            config: {
              ...p.config,
              webhooks: { ...p.config.webhooks, allow_private_targets: true },
            },
          },
          pk.project.id,
          r.url(),
        );
        await send(p, pk);
        const row = await waitFor(async () =>
          (await deliveriesOf(p, hook.id)).find((d) => d.attempts === 1),
        );
        // Refused before any connection: the attempt recorded made no request.
        assert.equal(r.on().length, 0, 'no request reached the receiver');
        assert.equal(row.status, 'pending');
        assert.equal(row.last_status, null);
        assert.match(row.last_error!, /^target refused: webhook URLs must be https:\/\//);
      });

      test('address rules: IPv4, IPv6, mapped, NAT64 and 6to4 forms; public addresses pass', () => {
        const blocked: [string, RegExp][] = [
          ['127.0.0.1', /loopback/],
          ['127.255.255.254', /loopback/],
          ['10.0.0.1', /private/],
          ['172.31.255.255', /private/],
          ['192.168.0.1', /private/],
          ['100.64.0.1', /carrier-grade/],
          ['100.127.255.255', /carrier-grade/],
          ['169.254.1.1', /link-local/],
          ['0.0.0.0', /unspecified/],
          ['0.1.2.3', /unspecified/],
          ['224.0.0.251', /multicast/],
          ['239.255.255.255', /multicast/],
          ['255.255.255.255', /reserved or broadcast/],
          ['240.0.0.1', /reserved/],
          ['192.0.2.1', /documentation/],
          ['198.51.100.7', /documentation/],
          ['203.0.113.9', /documentation/],
          ['198.18.0.1', /benchmarking/],
          ['192.0.0.8', /IETF/],
          ['::', /unspecified/],
          ['::1', /loopback/],
          ['::ffff:127.0.0.1', /loopback \(IPv4-mapped\)/],
          ['::ffff:7f00:1', /loopback \(IPv4-mapped\)/],
          ['::ffff:10.0.0.1', /private \(IPv4-mapped\)/],
          ['::ffff:169.254.169.254', /link-local \(IPv4-mapped\)/],
          ['::127.0.0.1', /loopback \(IPv4-compatible\)/],
          ['::8.8.8.8', /IPv4-compatible/],
          ['64:ff9b::10.0.0.1', /private \(NAT64\)/],
          ['64:ff9b::7f00:1', /loopback \(NAT64\)/],
          ['64:ff9b:1::1', /local-use NAT64/],
          ['2002:7f00:1::1', /loopback \(6to4\)/],
          ['2002:c0a8:101::1', /private \(6to4\)/],
          ['fc00::1', /unique local/],
          ['fdff:ffff::1', /unique local/],
          ['fe80::1', /link-local/],
          ['fe80::1%eth0', /link-local/],
          ['febf::1', /link-local/],
          ['fec0::1', /site-local/],
          ['ff02::1', /multicast/],
          ['ff05::2', /multicast/],
          ['2001:db8::1', /documentation/],
          ['3fff::1', /documentation/],
          ['2001::1', /IETF/],
          ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /IETF/],
          ['100::1', /discard/],
          ['not-an-ip', /not an IP address/],
          ['1.2.3', /not an IP address/],
        ];
        for (const [address, reason] of blocked)
          assert.match(nonPublicReason(address) ?? 'PUBLIC', reason, address);
        for (const address of [
          '8.8.8.8',
          '1.1.1.1',
          '93.184.216.34',
          '172.32.0.1',
          '100.128.0.1',
          '192.169.0.1',
          '2606:4700:4700::1111',
          '2a00:1450:4001:80b::200e',
          '::ffff:8.8.8.8',
          '64:ff9b::8.8.8.8',
          '2002:808:808::1',
          '2001:4860::8888',
        ]) {
          assert.equal(nonPublicReason(address), null, `${address} is public`);
        }
      });

      test('every resolved address is checked, and the connection goes to the checked address (DNS answers are pinned)', async (t) => {
        const s = scope(t);
        const r = await receiver(s);
        let lookups = 0;
        const to =
          (...addresses: string[]): Resolver =>
          async () => {
            lookups++;
            return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
          };
        const strict = { allowPrivate: false };
        // One private address among public ones is enough to refuse.
        await assert.rejects(
          resolveTarget(new URL('https://hooks.example.test/x'), strict, to('8.8.8.8', '10.0.0.7')),
          (e: unknown) => {
            assert.ok(e instanceof TargetError);
            assert.equal(e.code, 'forbidden_address');
            assert.match(
              e.message,
              /^hooks\.example\.test resolves to 10\.0\.0\.7, a private address/,
            );
            return true;
          },
        );
        assert.deepEqual(
          await resolveTarget(
            new URL('https://hooks.example.test/x'),
            strict,
            to('8.8.8.8', '2606:4700::1'),
          ),
          [
            { address: '8.8.8.8', family: 4 },
            { address: '2606:4700::1', family: 6 },
          ],
        );
        // With private targets allowed, plain http still may not go to a public address.
        await assert.rejects(
          resolveTarget(
            new URL('http://hooks.example.test/x'),
            { allowPrivate: true },
            to('127.0.0.1', '8.8.4.4'),
          ),
          /plain http:\/\/ is allowed only towards loopback or private addresses/,
        );
        assert.throws(() => parseTargetUrl('http://hooks.example.test/x', strict), /must be https/);

        // Delivery: the sender resolves, checks and connects to exactly that address (a name no real DNS knows).
        const sender = s.add(
          new WebhookSender({
            timeoutMs: HANG_GUARD_MS,
            policy: { allowPrivate: true },
            maxSocketsPerEndpoint: 2,
            resolver: to('127.0.0.1'),
            now: () => Date.now(),
          }),
          (x) => x.close(),
        );
        const body = Buffer.from(
          '{"id":"we.x","type":"webhook.test","created_at":"2026-01-01T00:00:00.000Z","data":{}}',
        );
        const ok = await sender.send('wh.a', {
          url: r.url('/pinned', 'hooks.example.test'),
          deliveryId: 'we.x',
          type: 'webhook.test',
          body,
          secrets: ['whsec_a'],
          timestamp: 1,
        });
        assert.deepEqual(ok, {
          ok: true,
          status: 200,
          error: null,
          answer: null,
          retryAfterMs: null,
          refused: false,
        });
        assert.equal(r.on('/pinned')[0].headers.host, `hooks.example.test:${r.port}`);
        // The same name now resolving to a forbidden address is refused before any connection.
        const strictSender = s.add(
          new WebhookSender({
            timeoutMs: HANG_GUARD_MS,
            policy: { allowPrivate: false },
            maxSocketsPerEndpoint: 2,
            resolver: to('93.184.216.34', '127.0.0.1'),
            now: () => Date.now(),
          }),
          (x) => x.close(),
        );
        const before = lookups;
        const no = await strictSender.send('wh.b', {
          url: `https://rebound.example.test:${r.port}/pinned`,
          deliveryId: 'we.y',
          type: 'webhook.test',
          body,
          secrets: ['whsec_a'],
          timestamp: 1,
        });
        assert.equal(lookups, before + 1, 'resolved at delivery time');
        assert.equal(no.ok, false);
        assert.equal(no.refused, true);
        assert.match(
          no.error!,
          /^target refused: rebound\.example\.test resolves to 127\.0\.0\.1, a loopback address/,
        );
        assert.equal(r.on('/pinned').length, 1);
      });

      /**
       * The deadline of the two tests below, and the stall (a busy loop of this thread) they put
       * past it. A request to a server in this process is answered in a few ms of the thread's
       * own time: far within the deadline on a loaded machine too (time it could not run is given
       * back, see StallClock).
       */
      const DEADLINE_MS = 1000;
      const STALL_MS = 1500;
      const stall = () => {
        const until = Date.now() + STALL_MS;
        while (Date.now() < until);
      };

      /**
       * A sender with a DEADLINE_MS deadline, and requests to `server` (started here, closed with
       * the scope). `late` holds the answers to /late: opened once the sender has given its verdict.
       */
      const senderWithDeadline = async (s: Scope, server: http.Server) => {
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        s.add(server, (x) => new Promise<void>((resolve) => x.close(() => resolve())));
        const port = (server.address() as net.AddressInfo).port;
        const sender = s.add(
          new WebhookSender({
            timeoutMs: DEADLINE_MS,
            policy: { allowPrivate: true },
            maxSocketsPerEndpoint: 2,
            now: () => Date.now(),
          }),
          (x) => x.close(),
        );
        const body = Buffer.from('{}');
        const req = (p: string) => ({
          url: `http://127.0.0.1:${port}${p}`,
          deliveryId: 'we.s',
          type: 'webhook.test',
          body,
          secrets: ['whsec_a'],
          timestamp: 1,
        });
        return { sender, req };
      };

      test('an answer already in the socket when a stalled event loop wakes past the deadline counts; the deadline still fails a late one', async (t) => {
        const s = scope(t);
        // The receiver runs in this process: after answering it stalls the event loop past the
        // sender's deadline, as a starved low-priority thread (or a long GC pause) would.
        const late = gate();
        const server = http.createServer((req, res) => {
          req.resume();
          if (req.url === '/late') return void late.opened.then(() => res.writeHead(204).end());
          res.writeHead(204);
          res.end(stall);
        });
        const { sender, req } = await senderWithDeadline(s, server);
        assert.deepEqual(await sender.send('wh.s', req('/stall')), {
          ok: true,
          status: 204,
          error: null,
          answer: null,
          retryAfterMs: null,
          refused: false,
        });
        // An answer that comes only after the verdict.
        const verdict = await sender.send('wh.s', req('/late'));
        late.open();
        assert.equal(verdict.ok, false);
        assert.equal(verdict.error, `timeout: no 2xx within ${DEADLINE_MS} ms`);
      });

      test('time the sending thread could not run does not count against the receiver: a stall before the answer arrives is not a timeout', async (t) => {
        const s = scope(t);
        const late = gate();
        const server = http.createServer((req, res) => {
          req.resume();
          if (req.url === '/late') return void late.opened.then(() => res.writeHead(204).end());
          // The answer is written a moment after this thread wakes from the stall below (two turns
          // of the event loop later), as an answer from a receiver elsewhere would arrive.
          setTimeout(() => setImmediate(() => setImmediate(() => res.writeHead(204).end())), 100);
        });
        const { sender, req } = await senderWithDeadline(s, server);
        // The request is on its way; then this thread cannot run for STALL_MS, past the deadline,
        // before the receiver's answer (due after 100 ms) is written.
        const stalled = sender.send('wh.s', req('/answer'));
        await new Promise((resolve) => setTimeout(resolve, 20));
        stall();
        assert.deepEqual(await stalled, {
          ok: true,
          status: 204,
          error: null,
          answer: null,
          retryAfterMs: null,
          refused: false,
        });
        // Without a stall the deadline holds: an answer that comes only after the verdict.
        const verdict = await sender.send('wh.s', req('/late'));
        late.open();
        assert.equal(verdict.ok, false);
        assert.equal(verdict.error, `timeout: no 2xx within ${DEADLINE_MS} ms`);
      });

      test('https: the certificate is verified against the URL host while the socket goes to the pinned address', async (t) => {
        const s = scope(t);
        const pems = await generate([{ name: 'commonName', value: 'hooks.example.test' }], {
          keySize: 2048,
          algorithm: 'sha256',
          extensions: [
            { name: 'subjectAltName', altNames: [{ type: 2, value: 'hooks.example.test' }] },
          ],
        });
        const r = await receiver(s, { tls: { key: pems.private, cert: pems.cert } });
        const resolver: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
        const body = Buffer.from(
          '{"id":"we.z","type":"webhook.test","created_at":"2026-01-01T00:00:00.000Z","data":{}}',
        );
        const req = (host: string) => ({
          url: `https://${host}:${r.port}/tls`,
          deliveryId: 'we.z',
          type: 'webhook.test',
          body,
          secrets: ['whsec_a'],
          timestamp: 1,
        });
        const trusted = s.add(
          new WebhookSender({
            timeoutMs: HANG_GUARD_MS,
            policy: { allowPrivate: true },
            maxSocketsPerEndpoint: 1,
            resolver,
            ca: pems.cert,
            now: () => Date.now(),
          }),
          (x) => x.close(),
        );
        assert.equal((await trusted.send('wh.t', req('hooks.example.test'))).ok, true);
        // Another name for the same address: the certificate does not match it.
        const wrongName = await trusted.send('wh.u', req('other.example.test'));
        assert.equal(wrongName.ok, false);
        assert.match(wrongName.error!, /ERR_TLS_CERT_ALTNAME_INVALID/);
        // Without the CA: an untrusted certificate.
        const untrusted = s.add(
          new WebhookSender({
            timeoutMs: HANG_GUARD_MS,
            policy: { allowPrivate: true },
            maxSocketsPerEndpoint: 1,
            resolver,
            now: () => Date.now(),
          }),
          (x) => x.close(),
        );
        const bad = await untrusted.send('wh.v', req('hooks.example.test'));
        assert.equal(bad.ok, false);
        assert.match(bad.error!, /DEPTH_ZERO_SELF_SIGNED_CERT|self.signed/i);
        assert.equal(r.on('/tls').length, 1);
      });
    });

    describe('webhook test and operator errors', () => {
      test('webhook test reports a failure without retrying it; unknown ids and bad --events are refused', async (t) => {
        const s = scope(t);
        const r = await receiver(s);
        r.respond = () => ({ status: 410, body: 'gone' });
        const p = await startPostern(s);
        const looked = await dispatcherProbe(s, p);
        const pk = await project(p);
        const hook = await addWebhook(p.ctx, pk.project.id, r.url());
        const result = await testWebhook(p.ctx, hook.id);
        assert.deepEqual(result, {
          id: result.id,
          endpoint_id: hook.id,
          type: 'webhook.test',
          delivered: false,
          status_code: 410,
          error: 'HTTP 410: gone',
          duration_ms: result.duration_ms,
        });
        assert.equal((await deliveryRow(p, result.id)).status, 'failed');
        await looked();
        assert.equal(r.on().length, 1, 'a test is never retried');
        assert.equal(
          (await view(p, pk, hook.id)).failing_since,
          null,
          'a test does not count towards the failure run',
        );
        await assert.rejects(
          testWebhook(p.ctx, 'wh.nope'),
          (e: unknown) => e instanceof OperatorError && e.code === 'not_found',
        );
        await assert.rejects(
          addWebhook(p.ctx, pk.project.id, r.url(), 'mail.sent,mail.opened'),
          /unknown event type mail\.opened/,
        );
        await assert.rejects(
          addWebhook(p.ctx, pk.project.id, r.url(), ' , '),
          /--events needs at least one event type/,
        );
        await assert.rejects(
          addWebhook(p.ctx, 'p.nope', r.url()),
          (e: unknown) => e instanceof OperatorError && e.code === 'not_found',
        );
        await assert.rejects(
          async () => enableWebhook(p.ctx, 'wh.nope'),
          (e: unknown) => e instanceof OperatorError && e.code === 'not_found',
        );
        await assert.rejects(
          async () => rotateWebhookSecret(p.ctx, 'wh.nope'),
          (e: unknown) => e instanceof OperatorError && e.code === 'not_found',
        );
      });

      test('the ladder function: bounds of the jitter, Retry-After floor and cap, attempts spent', () => {
        const ladder = DEFAULT_LADDER;
        assert.equal(
          retryDelayMs(1, ladder, 0.1, null, () => 0),
          54_000,
        );
        assert.equal(
          retryDelayMs(1, ladder, 0.1, null, () => 1),
          66_000,
        );
        assert.equal(
          retryDelayMs(5, ladder, 0.1, null, () => 0.5),
          21_600_000,
        );
        assert.equal(retryDelayMs(6, ladder, 0.1, null), null);
        assert.equal(retryDelayMs(0, ladder, 0.1, null), null);
        assert.equal(retryDelayMs(2, ladder, 0, 3_600_000), 3_600_000);
        assert.equal(retryDelayMs(2, ladder, 0, 1_000), 600_000);
        assert.equal(retryDelayMs(1, ladder, 0, 10 * 86_400_000), 21_600_000);
        assert.equal(retryDelayMs(1, [], 0.1, null), null, 'an empty ladder: one attempt');
        const total = ladder.reduce((a, b) => a + b, 0) / 3600;
        assert.ok(total > 9 && total < 9.3, `the default ladder spans ${total.toFixed(2)} h`);
      });
    });
  });
});

describe('the webhook thread’s CPU budget on a saturated machine', () => {
  /** A 2-core machine driven by hand: `advance(ms, ownMs, idleMs)` moves wall time and both counters. */
  function machine() {
    let at = 0;
    const cpu: CpuReading = { ownRunMs: 0, machineIdleMs: 0 };
    return {
      budget: (share: number) =>
        new SaturationBudget(
          share,
          () => ({ ...cpu }),
          2,
          () => at,
        ),
      advance(ms: number, ownMs: number, idleMs: number) {
        at += ms;
        cpu.ownRunMs += ownMs;
        cpu.machineIdleMs += idleMs;
      },
    };
  }

  test('with CPU to spare the thread is never held, however much it uses', () => {
    const m = machine();
    const budget = m.budget(0.1);
    for (let i = 0; i < 20; i++) {
      assert.equal(budget.holdMs(), 0);
      // It uses a whole core; the other core is idle.
      m.advance(25, 25, 25);
    }
    assert.equal(budget.holdMs(), 0);
  });

  test('saturated, the thread is held until its average is back within its share', () => {
    const m = machine();
    const budget = m.budget(0.1);
    assert.equal(budget.holdMs(), 0);
    // 250 ms in which it used 50 ms and nothing was idle: 0.2 core against a share of 0.1.
    for (let i = 0; i < 10; i++) {
      m.advance(25, 5, 0);
      budget.holdMs();
    }
    // 50 ms of its CPU fits 0.1 core over 500 ms: held for the 250 ms still missing, 100 at most at a time.
    assert.equal(budget.holdMs(), 100);
    // Held (using nothing) while the others keep the machine busy: the window (the last 250 ms)
    // slides past its use, so the hold shrinks (30 ms used in it: 300 ms of share), then ends.
    for (let i = 0; i < 4; i++) {
      m.advance(25, 0, 0);
      budget.holdMs();
    }
    assert.equal(budget.holdMs(), 50);
    for (let i = 0; i < 2; i++) {
      m.advance(25, 0, 0);
      budget.holdMs();
    }
    assert.equal(budget.holdMs(), 0);
  });

  test('saturated but within its share, or with the limit at the core count, the thread goes ahead', () => {
    const m = machine();
    const within = m.budget(0.1);
    const off = m.budget(2);
    for (let i = 0; i < 10; i++) {
      m.advance(25, 2, 0);
      assert.equal(within.holdMs(), 0);
      m.advance(0, 0, 0);
      assert.equal(off.holdMs(), 0);
    }
  });

  test('this machine’s counters can be read (Linux)', {
    skip: process.platform !== 'linux',
  }, () => {
    const a = readCpu();
    assert.ok(a && a.ownRunMs > 0 && a.machineIdleMs > 0, JSON.stringify(a));
  });
});
