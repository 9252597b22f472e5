/**
 * Delivery engine (issue 5) against REAL SMTP next hops on 127.0.0.1: smtp-server instances
 * started here (each one a "provider account"), and Postfix's smtp-sink as a child process.
 * Messages come in over real HTTP (and once over Postern's own SMTP door) into an in-process
 * Postern with delivery on; time-dependent rules (retry ladder, maximum age, scheduled_at) are
 * driven by a ManualClock while the poll loop runs on real timers.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import nodemailer from 'nodemailer';
import { ManualClock } from '../../src/clock.js';
import { createKey } from '../../src/operator/keys.js';
import { cancelMessage, messageShow, releaseMessage } from '../../src/operator/messages.js';
import { setPaused, setStrategy } from '../../src/operator/projects.js';
import {
  type AttachOptions,
  attachProvider,
  detachProvider,
} from '../../src/operator/providers.js';
import { suppress, suppressionList } from '../../src/operator/suppressions.js';
import { smtpRelayOf } from '../../src/providers/registry.js';
import { providerOptionHeaders } from '../../src/providers/smtpRelay.js';
import { eventsForMessage } from '../../src/store/events.js';
import { assertAccepted, assertErrorEnvelope } from '../support/assertions.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  tempStateDir,
  validMessage,
} from '../support/postern.js';
import { dropDatabaseFor } from '../support/postgres.js';
import { schedulerProbe } from '../support/probes.js';
import { Sink, type SinkBehaviour } from '../support/relaySink.js';
import { storedMimeOf } from '../support/storedMime.js';
import { HANG_GUARD_MS, scope, waitFor } from '../support/waiting.js';

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

async function startSink(
  s: ReturnType<typeof scope>,
  name: string,
  behaviour: SinkBehaviour = {},
): Promise<Sink> {
  return s.add(await Sink.start(name, behaviour), (sink) => sink.close());
}

/** A port nothing listens on (bound and released). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function startPostern(
  s: ReturnType<typeof scope>,
  opts: { clock?: ManualClock; delivery?: Record<string, unknown>; smtp?: boolean } = {},
): Promise<TestPostern> {
  const p = await startTestPostern({
    clock: opts.clock,
    smtp: opts.smtp,
    config: { delivery: { poll_interval_ms: 30, ...opts.delivery } },
  });
  return s.add(p, (x) => x.close());
}

/** A project with keys and NO provider (each test attaches its own sinks). */
async function project(p: TestPostern, name = 'delivery'): Promise<ProjectWithKeys> {
  return await createProjectWithKeys(p.ctx, name, 'pro', { provider: false });
}

/** Attaches a sink as one provider account of the project. */
function attach(
  p: TestPostern,
  pk: ProjectWithKeys,
  port: number,
  opts: Partial<AttachOptions> = {},
) {
  return attachProvider(p.ctx, pk.project.id, {
    slug: 'smtp',
    host: '127.0.0.1',
    port: String(port),
    tls: 'none',
    ...opts,
  });
}

async function send(
  baseUrl: string,
  key: string,
  overrides: Record<string, unknown> = {},
  status = 'queued',
): Promise<string> {
  const res = await post(baseUrl, '/v1/send', { key, json: validMessage(overrides) });
  assertAccepted(res, status);
  return res.body.id as string;
}

const statusOf = async (p: TestPostern, id: string) => (await messageShow(p.ctx, id)).status;

async function waitStatus(p: TestPostern, id: string, status: string) {
  await waitFor(
    async () => (await statusOf(p, id)) === status,
    HANG_GUARD_MS,
    `${id} to be ${status} (is ${await statusOf(p, id)})`,
  );
  return messageShow(p.ctx, id);
}

async function events(p: TestPostern, id: string): Promise<{ type: string; data: any }[]> {
  return (await eventsForMessage(p.ctx.store, id)).map((e) => ({
    type: e.type,
    data: JSON.parse(e.data),
  }));
}

const attemptsOf = async (p: TestPostern, id: string) =>
  (await messageShow(p.ctx, id)).attempts_log.map((a) => ({
    provider: a.provider,
    provider_account_id: a.provider_account_id,
    outcome: a.outcome,
  }));

const spooled = (p: TestPostern, id: string) => storedMimeOf(p.ctx.store, p.stateDir, id);

/** Line endings normalised to CRLF. */
const crlf = (b: Buffer) => b.toString('latin1').replace(/\r?\n/g, '\r\n');

/* ------------------------------------------------------------------------------------------ */
/* 1. End to end                                                                              */
/* ------------------------------------------------------------------------------------------ */

describe('end to end through a real SMTP relay', () => {
  test('a message sent over HTTP reaches the relay byte for byte, Bcc only in the envelope, and ends sent with the relay id', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const p = await startPostern(s);
    const pk = await project(p);
    const account = await attach(p, pk, sink.port, { priority: '1' });

    const id = await send(p.production, pk.liveKey, {
      from: 'Sender <sender@example.com>',
      to: ['Ann <ann@example.org>'],
      cc: 'cc@example.org',
      bcc: 'hidden@example.net',
      subject: 'End to end',
      text: 'Plain part\nsecond line',
      html: '<p>HTML part</p>',
      headers: { 'X-Custom': 'kept' },
      tags: ['e2e'],
    });
    const shown = await waitStatus(p, id, 'sent');

    assert.equal(sink.received.length, 1);
    const got = sink.received[0];
    assert.equal(got.from, 'sender@example.com');
    assert.deepEqual([...got.to].sort(), [
      'ann@example.org',
      'cc@example.org',
      'hidden@example.net',
    ]);
    // The relay receives the stored MIME (no DKIM key here, so nothing is prepended). Compared
    // after line-ending normalisation: the SMTP client writes every line with CRLF on the wire,
    // while the stored file may hold a bare LF inside a text part (a separate test below pins
    // the byte-for-byte case).
    const stored = await spooled(p, id);
    assert.equal(crlf(got.raw), crlf(stored));
    assert.ok(got.raw.includes(Buffer.from('Plain part\r\nsecond line\r\n')));
    // The Bcc recipient is in the envelope only.
    const headerBlock = got.raw.toString('utf8').split('\r\n\r\n')[0];
    assert.doesNotMatch(headerBlock, /hidden@example\.net/i);
    assert.doesNotMatch(headerBlock, /^bcc:/im);
    assert.match(
      headerBlock,
      new RegExp(`^Message-ID: <${id.replace('.', '\\.')}@example\\.com>$`, 'im'),
    );

    assert.deepEqual(
      await p.ctx.store.get(
        'SELECT status, provider_slug, provider_message_id, last_error FROM messages WHERE id = ?',
        id,
      ),
      {
        status: 'sent',
        provider_slug: 'smtp',
        provider_message_id: 'relay-0001',
        last_error: null,
      },
    );
    assert.equal(shown.provider, 'smtp');
    assert.equal(shown.provider_message_id, 'relay-0001');
    assert.equal(shown.last_error, null);
    assert.equal(shown.next_attempt_at, null);
    assert.deepEqual(shown.recipient_outcomes, []);
    assert.deepEqual(await attemptsOf(p, id), [
      { provider: 'smtp', provider_account_id: account.id, outcome: 'sent' },
    ]);
    assert.equal(shown.attempts_log[0].reply, '250 OK queued as relay-0001');

    const evs = await events(p, id);
    assert.deepEqual(
      evs.map((e) => e.type),
      ['mail.accepted', 'mail.sent'],
    );
    assert.equal(evs[1].data.provider, 'smtp');
    assert.equal(evs[1].data.provider_message_id, 'relay-0001');
    assert.deepEqual(evs[1].data.mail, evs[0].data.mail);
  });

  test('the stored MIME of an HTTP send is CRLF throughout, so the relay receives exactly the stored bytes', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const p = await startPostern(s);
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const id = await send(p.production, pk.liveKey, {
      text: 'line one\nline two\n\nline four',
      html: '<p>one</p>\n<p>two</p>',
    });
    await waitStatus(p, id, 'sent');
    const stored = await spooled(p, id);
    const bareLf = stored
      .toString('latin1')
      .split('\n')
      .slice(0, -1)
      .filter((line) => !line.endsWith('\r'));
    assert.deepEqual(bareLf, [], 'lines of the stored MIME that end in a bare LF');
    assert.equal(sink.received[0].raw.toString('latin1'), stored.toString('latin1'));
  });

  test('a message accepted over SMTP (STARTTLS + AUTH with the live key) is relayed the same way', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const p = await startPostern(s, { smtp: true });
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const client = nodemailer.createTransport({
      host: '127.0.0.1',
      port: p.smtp.production.starttls,
      secure: false,
      requireTLS: true,
      auth: { user: 'anyone', pass: pk.liveKey },
      tls: { rejectUnauthorized: false },
    });
    s.add(client, (c) => c.close());
    const info = await client.sendMail({
      envelope: { from: 'sender@example.com', to: ['ann@example.org', 'hidden@example.net'] },
      from: 'Sender <sender@example.com>',
      to: 'ann@example.org',
      subject: 'Over SMTP',
      text: 'Hello from the SMTP door',
    });
    const m = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/.exec(info.response);
    assert.ok(m, info.response);
    const id = m[1];

    const shown = await waitStatus(p, id, 'sent');
    assert.equal(sink.received.length, 1);
    const got = sink.received[0];
    assert.equal(got.from, 'sender@example.com');
    assert.deepEqual([...got.to].sort(), ['ann@example.org', 'hidden@example.net']);
    assert.ok(got.raw.equals(await spooled(p, id)), 'relayed MIME equals the stored MIME');
    assert.doesNotMatch(got.raw.toString('utf8').split('\r\n\r\n')[0], /hidden@example\.net/);
    assert.equal(shown.source, 'smtp');
    assert.equal(shown.provider, 'smtp');
    assert.equal(shown.provider_message_id, 'relay-0001');
    assert.deepEqual(
      (await events(p, id)).map((e) => e.type),
      ['mail.accepted', 'mail.sent'],
    );
    assert.deepEqual(
      shown.attempts_log.map((a) => a.outcome),
      ['sent'],
    );
  });

  test('an account loaded again unchanged (after an operator change elsewhere) keeps its relay connection', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const p = await startPostern(s);
    const pk = await project(p);
    await attach(p, pk, sink.port);

    await waitStatus(p, await send(p.production, pk.liveKey, { subject: 'First' }), 'sent');
    // A new key moves the policy generation: every cached account is loaded from its row again.
    await createKey(p.ctx, pk.project.id, 'live');
    await waitStatus(p, await send(p.production, pk.liveKey, { subject: 'Second' }), 'sent');

    assert.equal(sink.received.length, 2);
    assert.equal(sink.connections, 1, 'both messages went over the pooled connection');
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 2. Failover                                                                                */
/* ------------------------------------------------------------------------------------------ */

describe('a message accepted for now wakes the scheduler', () => {
  test('with an idle poll of an hour, messages sent over HTTP and SMTP are handed off at once, not at the next poll', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'wake');
    const stateDir = s.add(tempStateDir('postern-wake-'), async (dir) => {
      await dropDatabaseFor(dir);
      rmSync(dir, { recursive: true, force: true });
    });
    // A message queued while delivery was off, for the scheduler's first look (at start) to take.
    const off = await startTestPostern({ stateDir, config: { delivery: { enabled: false } } });
    const pk = await project(off);
    await attach(off, pk, sink.port);
    const before = await send(off.production, pk.liveKey, { subject: 'queued before the start' });
    await off.close();
    const p = s.add(
      await startTestPostern({
        stateDir,
        smtp: true,
        config: { delivery: { poll_interval_ms: 3_600_000 } },
      }),
      (x) => x.close(),
    );
    // Relayed by the first look: that look is over, and the next poll is an hour away (far past
    // any wait here), so what follows is handed off only if its acceptance wakes the scheduler.
    await waitStatus(p, before, 'sent');

    const overHttp = await send(p.production, pk.liveKey, { subject: 'woken over HTTP' });
    await waitStatus(p, overHttp, 'sent');

    const transport = s.add(
      nodemailer.createTransport({
        host: '127.0.0.1',
        port: p.smtp.production.starttls,
        secure: false,
        requireTLS: true,
        tls: { rejectUnauthorized: false },
        auth: { user: 'user', pass: pk.liveKey },
      }),
      (x) => x.close(),
    );
    const info = await transport.sendMail({
      from: 'sender@example.com',
      to: 'ann@example.org',
      subject: 'woken over SMTP',
      text: 'hello',
    });
    const overSmtp = /queued as (m\.[0-9a-z]{26})/.exec(info.response)![1];
    await waitStatus(p, overSmtp, 'sent');
    assert.deepEqual(
      sink.received.map((m) => m.from),
      ['sender@example.com', 'sender@example.com', 'sender@example.com'],
    );
  });
});

describe('provider_options over a provider SMTP relay', () => {
  test('provider-a-smtp gets X-SES-CONFIGURATION-SET and provider-e-smtp X-PM-Message-Stream in front of the stored MIME; the generic smtp slug gets neither', async (t) => {
    const s = scope(t);
    const options = {
      'provider-a-api': { configuration_set: 'Transactional' },
      'provider-e-api': { message_stream: 'outbound' },
    };
    const cases: [string, string][] = [
      ['provider-a-smtp', 'X-SES-CONFIGURATION-SET: Transactional\r\n'],
      ['provider-e-smtp', 'X-PM-Message-Stream: outbound\r\n'],
      ['smtp', ''],
    ];
    const p = await startPostern(s);
    for (const [slug, expected] of cases) {
      const sink = await startSink(s, slug);
      const pk = await project(p, `options ${slug}`);
      await attach(p, pk, sink.port, { slug });
      const id = await send(p.production, pk.liveKey, {
        subject: `options via ${slug}`,
        provider_options: options,
      });
      await waitStatus(p, id, 'sent');
      assert.equal(
        sink.received[0].raw.toString('latin1'),
        expected + (await spooled(p, id)).toString('latin1'),
        slug,
      );
    }
  });

  test('an option value holding CR or LF (stored before validation refused it) is never written as a header', () => {
    for (const value of ['cs\r\nBcc: attacker@evil.example', 'cs\nX-Injected: 1', 'cs\r']) {
      assert.equal(
        providerOptionHeaders(smtpRelayOf('provider-a-smtp')!, {
          'provider-a-api': { configuration_set: value },
        }),
        '',
      );
      assert.equal(
        providerOptionHeaders(smtpRelayOf('provider-e-smtp')!, {
          'provider-e-api': { message_stream: value },
        }),
        '',
      );
    }
    assert.equal(
      providerOptionHeaders(smtpRelayOf('provider-a-smtp')!, {
        'provider-a-api': { configuration_set: 'cs' },
      }),
      'X-SES-CONFIGURATION-SET: cs\r\n',
    );
  });
});

describe('failover to the next account in the same hand-off', () => {
  const cases: {
    name: string;
    outcome: 'temporary' | 'account';
    first: (
      s: ReturnType<typeof scope>,
    ) => Promise<{ port: number; attach?: Partial<AttachOptions>; sink?: Sink }>;
  }[] = [
    {
      name: 'the first account refuses MAIL FROM with 421',
      outcome: 'temporary',
      first: async (s) => {
        const sink = await startSink(s, 'first', {
          mail: () => ({ code: 421, text: '4.3.2 Service shutting down' }),
        });
        return { port: sink.port, sink };
      },
    },
    {
      name: 'the first account refuses MAIL FROM with 451',
      outcome: 'temporary',
      first: async (s) => {
        const sink = await startSink(s, 'first', {
          mail: () => ({ code: 451, text: '4.3.0 Try again later' }),
        });
        return { port: sink.port, sink };
      },
    },
    {
      name: 'the first account refuses DATA with 451',
      outcome: 'temporary',
      first: async (s) => {
        const sink = await startSink(s, 'first', {
          data: () => ({ code: 451, text: '4.3.0 Local error in processing' }),
        });
        return { port: sink.port, sink };
      },
    },
    {
      name: 'the first account is unreachable (closed port)',
      outcome: 'temporary',
      first: async () => ({ port: await closedPort() }),
    },
    {
      name: 'the first account stalls past smtp_timeout_ms',
      outcome: 'temporary',
      first: async (s) => {
        // It never answers MAIL FROM: the timeout, not the machine's speed, ends the attempt.
        const sink = await startSink(s, 'first', { mailUntil: new Promise(() => undefined) });
        return { port: sink.port, sink };
      },
    },
    {
      name: 'the first account refuses the credentials with 535',
      outcome: 'account',
      first: async (s) => {
        const sink = await startSink(s, 'first', { refuseAuth: true });
        return { port: sink.port, sink, attach: { user: 'postern', pass: 'wrong-password' } };
      },
    },
    {
      name: 'the first account refuses the sender permanently (550 at MAIL FROM)',
      outcome: 'account',
      first: async (s) => {
        const sink = await startSink(s, 'first', {
          mail: () => ({ code: 550, text: '5.7.1 Sender not allowed on this account' }),
        });
        return { port: sink.port, sink };
      },
    },
  ];

  for (const c of cases) {
    test(`${c.name}: the message is sent by the priority-2 account at once, both attempts recorded`, async (t) => {
      const s = scope(t);
      const second = await startSink(s, 'second');
      const first = await c.first(s);
      const clock = new ManualClock(T0);
      // A timeout each step of a local relay meets many times over on a loaded machine.
      const p = await startPostern(s, {
        clock,
        delivery: { smtp_timeout_ms: 5000, retry_ladder_seconds: [60] },
      });
      const pk = await project(p);
      const a1 = await attach(p, pk, first.port, { slug: 'smtp', priority: '1', ...first.attach });
      const a2 = await attach(p, pk, second.port, { slug: 'provider-b-smtp', priority: '2' });

      const id = await send(p.production, pk.liveKey, {
        to: 'ann@example.org',
        bcc: 'hidden@example.net',
      });
      const shown = await waitStatus(p, id, 'sent');

      // Same hand-off: the clock never moved, so no retry wait was involved.
      assert.equal(shown.attempts, 1);
      assert.equal(shown.provider, 'provider-b-smtp');
      assert.equal(shown.provider_message_id, 'second-0001');
      assert.deepEqual(await attemptsOf(p, id), [
        { provider: 'smtp', provider_account_id: a1.id, outcome: c.outcome },
        { provider: 'provider-b-smtp', provider_account_id: a2.id, outcome: 'sent' },
      ]);
      assert.equal(second.received.length, 1);
      assert.deepEqual([...second.received[0].to].sort(), [
        'ann@example.org',
        'hidden@example.net',
      ]);
      assert.equal(first.sink?.received.length ?? 0, 0);
      const evs = await events(p, id);
      assert.deepEqual(
        evs.map((e) => e.type),
        ['mail.accepted', 'mail.sent'],
      );
      assert.equal(evs[1].data.provider, 'provider-b-smtp');
    });
  }

  test('a content refusal (554 at DATA) is permanent: the message fails, no other account is tried', async (t) => {
    const s = scope(t);
    const second = await startSink(s, 'second');
    const first = await startSink(s, 'first', {
      data: () => ({ code: 554, text: '5.6.0 Message content rejected' }),
    });
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, first.port, { priority: '1' });
    await attach(p, pk, second.port, { slug: 'provider-b-smtp', priority: '2' });

    const id = await send(p.production, pk.liveKey);
    const shown = await waitStatus(p, id, 'failed');
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.provider, a.outcome]),
      [['smtp', 'permanent']],
    );
    assert.equal(second.received.length, 0);
    const evs = await events(p, id);
    assert.deepEqual(
      evs.map((e) => e.type),
      ['mail.accepted', 'mail.failed'],
    );
    assert.equal(evs[1].data.failure.reason, 'rejected');
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 3. Pins                                                                                    */
/* ------------------------------------------------------------------------------------------ */

describe('a pinned send is never rerouted', () => {
  test('pinned to a temporarily refusing account: back to queued, retried on the ladder, delivered by that account once it recovers', async (t) => {
    const s = scope(t);
    const healthy = await startSink(s, 'healthy');
    let refusing = true;
    const pinned = await startSink(s, 'pinned', {
      data: () => (refusing ? { code: 451, text: '4.3.0 Try again later' } : null),
    });
    const clock = new ManualClock(T0);
    const p = await startPostern(s, { clock, delivery: { retry_ladder_seconds: [60] } });
    const looked = await schedulerProbe(s, p);
    const pk = await project(p);
    // The healthy account even has the better priority: a pin ignores priorities.
    await attach(p, pk, healthy.port, { slug: 'smtp', priority: '1' });
    const b = await attach(p, pk, pinned.port, { slug: 'provider-b-smtp', priority: '5' });

    const id = await send(p.production, pk.liveKey, { routing: { provider: 'provider-b-smtp' } });
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length === 1 &&
        (await statusOf(p, id)) === 'queued',
      HANG_GUARD_MS,
      'first attempt',
    );
    let shown = await messageShow(p.ctx, id);
    assert.equal(shown.next_attempt_at, iso(T0 + 60_000));
    assert.match(shown.last_error ?? '', /^provider-b-smtp: 451 4\.3\.0 Try again later/);
    assert.deepEqual(await attemptsOf(p, id), [
      { provider: 'provider-b-smtp', provider_account_id: b.id, outcome: 'temporary' },
    ]);

    // Not due yet: the scheduler looks again, and leaves it.
    await looked();
    assert.equal((await messageShow(p.ctx, id)).attempts_log.length, 1);
    assert.equal(await statusOf(p, id), 'queued');

    // Due again, still refusing: retried on the same account only.
    clock.advance(60_000);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length === 2 &&
        (await statusOf(p, id)) === 'queued',
      HANG_GUARD_MS,
      'second attempt',
    );
    assert.equal(healthy.received.length, 0);

    refusing = false;
    clock.advance(60_000);
    shown = await waitStatus(p, id, 'sent');
    assert.equal(shown.provider, 'provider-b-smtp');
    assert.equal(shown.provider_message_id, 'pinned-0001');
    assert.equal(shown.last_error, null);
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.provider, a.outcome]),
      [
        ['provider-b-smtp', 'temporary'],
        ['provider-b-smtp', 'temporary'],
        ['provider-b-smtp', 'sent'],
      ],
    );
    assert.equal(healthy.received.length, 0);
    assert.equal(pinned.received.length, 1);
    assert.deepEqual(
      (await events(p, id)).map((e) => e.type),
      ['mail.accepted', 'mail.sent'],
    );
  });

  test('pinned to an account detached after acceptance: held with an error, never sent by another account', async (t) => {
    const s = scope(t);
    const healthy = await startSink(s, 'healthy');
    const pinned = await startSink(s, 'pinned');
    const clock = new ManualClock(T0);
    const p = await startPostern(s, { clock, delivery: { retry_ladder_seconds: [60] } });
    const pk = await project(p);
    await attach(p, pk, healthy.port, { slug: 'smtp', priority: '1' });
    const b = await attach(p, pk, pinned.port, { slug: 'provider-b-smtp', priority: '2' });

    await setPaused(p.ctx, pk.project.id, true);
    const id = await send(
      p.production,
      pk.liveKey,
      { routing: { provider: 'provider-b-smtp' } },
      'paused',
    );
    await detachProvider(p.ctx, b.id);
    await setPaused(p.ctx, pk.project.id, false);

    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).last_error !== null && (await statusOf(p, id)) === 'queued',
      HANG_GUARD_MS,
      'hand-off without candidates',
    );
    const shown = await messageShow(p.ctx, id);
    assert.equal(shown.last_error, 'no attached provider matches the pinned routing');
    assert.equal(shown.next_attempt_at, iso(T0 + 60_000));
    clock.advance(60_000);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts === 2 && (await statusOf(p, id)) === 'queued',
      HANG_GUARD_MS,
      'second hand-off',
    );
    assert.deepEqual((await messageShow(p.ctx, id)).attempts_log, []);
    assert.equal(healthy.received.length + pinned.received.length, 0);
  });

  test('a preference list is tried in its own order, and nothing outside it', async (t) => {
    const s = scope(t);
    const outside = await startSink(s, 'outside');
    const c = await startSink(s, 'c', { mail: () => ({ code: 451, text: '4.3.0 busy' }) });
    const b = await startSink(s, 'b');
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, outside.port, { slug: 'smtp', priority: '1' });
    await attach(p, pk, b.port, { slug: 'provider-b-smtp', priority: '2' });
    await attach(p, pk, c.port, { slug: 'provider-c-smtp', priority: '3' });

    const id = await send(p.production, pk.liveKey, {
      routing: { provider: ['provider-c-smtp', 'provider-b-smtp'] },
    });
    const shown = await waitStatus(p, id, 'sent');
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.provider, a.outcome]),
      [
        ['provider-c-smtp', 'temporary'],
        ['provider-b-smtp', 'sent'],
      ],
    );
    assert.equal(outside.received.length, 0);
    assert.equal(b.received.length, 1);
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 4. Strategies                                                                              */
/* ------------------------------------------------------------------------------------------ */

describe('routing strategies', () => {
  async function threeAccounts(t: TestContext) {
    const s = scope(t);
    const sinks = [
      await startSink(s, 'one'),
      await startSink(s, 'two'),
      await startSink(s, 'three'),
    ];
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    const slugs = ['smtp', 'provider-b-smtp', 'provider-c-smtp'];
    for (const [i, sink] of sinks.entries())
      await attach(p, pk, sink.port, { slug: slugs[i], priority: String(i + 1) });
    return { s, sinks, p, pk };
  }

  test('round-robin (project strategy) spreads 9 messages 3/3/3 over 3 accounts', async (t) => {
    const { sinks, p, pk } = await threeAccounts(t);
    await setStrategy(p.ctx, pk.project.id, 'round-robin');
    const ids: string[] = [];
    for (let i = 0; i < 9; i++)
      ids.push(await send(p.production, pk.liveKey, { subject: `rr ${i}` }));
    for (const id of ids) await waitStatus(p, id, 'sent');
    assert.deepEqual(
      sinks.map((x) => x.received.length),
      [3, 3, 3],
    );
    const bySlug = new Map<string, number>();
    for (const id of ids) {
      const slug = (await messageShow(p.ctx, id)).provider!;
      bySlug.set(slug, (bySlug.get(slug) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries([...bySlug].sort()), {
      'provider-b-smtp': 3,
      'provider-c-smtp': 3,
      smtp: 3,
    });
  });

  test('round-robin as the message strategy overrides the project default', async (t) => {
    const { sinks, p, pk } = await threeAccounts(t);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push(await send(p.production, pk.liveKey, { routing: { strategy: 'round-robin' } }));
    for (const id of ids) await waitStatus(p, id, 'sent');
    assert.deepEqual(
      sinks.map((x) => x.received.length),
      [2, 2, 2],
    );
  });

  test('fallback: every message goes to the highest-priority account', async (t) => {
    const { sinks, p, pk } = await threeAccounts(t);
    await setStrategy(p.ctx, pk.project.id, 'fallback');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await send(p.production, pk.liveKey));
    for (const id of ids) assert.equal((await waitStatus(p, id, 'sent')).provider, 'smtp');
    assert.deepEqual(
      sinks.map((x) => x.received.length),
      [5, 0, 0],
    );
  });

  test('random: every message delivered exactly once, over more than one account', async (t) => {
    const { sinks, p, pk } = await threeAccounts(t);
    await setStrategy(p.ctx, pk.project.id, 'random');
    const ids: string[] = [];
    for (let i = 0; i < 15; i++)
      ids.push(await send(p.production, pk.liveKey, { subject: `random ${i}` }));
    for (const id of ids) await waitStatus(p, id, 'sent');
    const counts = sinks.map((x) => x.received.length);
    assert.equal(
      counts.reduce((a, b) => a + b, 0),
      15,
    );
    // 15 independent uniform choices all landing on one of 3 accounts: p ≈ 2e-7.
    assert.ok(counts.filter((n) => n > 0).length >= 2, `distribution ${counts.join('/')}`);
    const subjects = sinks
      .flatMap((x) =>
        x.received.map((r) => /^Subject: (.*)$/m.exec(r.raw.toString('utf8'))![1].trim()),
      )
      .sort();
    assert.deepEqual(subjects, Array.from({ length: 15 }, (_, i) => `random ${i}`).sort());
  });

  test('free-first: the account with free allowance takes the first 2 messages, then the priority order resumes', async (t) => {
    const s = scope(t);
    const a = await startSink(s, 'free');
    const b = await startSink(s, 'paid');
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, a.port, { slug: 'provider-b-smtp', priority: '2', freeQuota: '2' });
    await attach(p, pk, b.port, { slug: 'smtp', priority: '1' });
    await setStrategy(p.ctx, pk.project.id, 'free-first');

    const providers: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = await send(p.production, pk.liveKey, { subject: `ff ${i}` });
      providers.push((await waitStatus(p, id, 'sent')).provider!);
    }
    assert.deepEqual(providers, ['provider-b-smtp', 'provider-b-smtp', 'smtp', 'smtp', 'smtp']);
    assert.equal(a.received.length, 2);
    assert.equal(b.received.length, 3);
  });

  test('free-first: messages handed off together never spend more than the free allowance', async (t) => {
    const s = scope(t);
    const a = await startSink(s, 'free');
    const b = await startSink(s, 'paid');
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, a.port, { slug: 'provider-b-smtp', priority: '2', freeQuota: '2' });
    await attach(p, pk, b.port, { slug: 'smtp', priority: '1' });
    await setStrategy(p.ctx, pk.project.id, 'free-first');

    // Held by the paused project, then released together: one scheduler turn leases all six.
    await setPaused(p.ctx, pk.project.id, true);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push(await send(p.production, pk.liveKey, { subject: `ff ${i}` }, 'paused'));
    await setPaused(p.ctx, pk.project.id, false);
    for (const id of ids) await waitStatus(p, id, 'sent');
    assert.deepEqual([a.received.length, b.received.length], [2, 4]);
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 5. Retries                                                                                 */
/* ------------------------------------------------------------------------------------------ */

describe('retry on the backoff ladder', () => {
  test('451 at DATA twice, then 250: queued at +60 s, then +120 s, then sent; three attempts recorded', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'flaky', {
      data: (n) => (n < 2 ? { code: 451, text: '4.3.0 Temporary local problem' } : null),
    });
    const clock = new ManualClock(T0);
    const p = await startPostern(s, { clock, delivery: { retry_ladder_seconds: [60, 120] } });
    const looked = await schedulerProbe(s, p);
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const id = await send(p.production, pk.liveKey);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length === 1 &&
        (await statusOf(p, id)) === 'queued',
      HANG_GUARD_MS,
      'first failure',
    );
    let shown = await messageShow(p.ctx, id);
    assert.equal(shown.next_attempt_at, iso(T0 + 60_000));
    assert.equal(shown.last_error, 'smtp: 451 4.3.0 Temporary local problem');
    await looked();
    assert.equal(sink.dataCount, 1, 'not retried before its time');
    assert.equal(await statusOf(p, id), 'queued');

    clock.advance(60_000);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length === 2 &&
        (await statusOf(p, id)) === 'queued',
      HANG_GUARD_MS,
      'second failure',
    );
    shown = await messageShow(p.ctx, id);
    assert.equal(shown.next_attempt_at, iso(T0 + 60_000 + 120_000));

    clock.advance(119_000);
    await looked();
    assert.equal(await statusOf(p, id), 'queued', 'one second early: still waiting');
    clock.advance(1_000);
    shown = await waitStatus(p, id, 'sent');
    assert.equal(shown.attempts, 3);
    assert.equal(shown.provider_message_id, 'flaky-0001');
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.outcome, a.started_at]),
      [
        ['temporary', iso(T0)],
        ['temporary', iso(T0 + 60_000)],
        ['sent', iso(T0 + 180_000)],
      ],
    );
    assert.equal(sink.received.length, 1);
    assert.deepEqual(
      (await events(p, id)).map((e) => e.type),
      ['mail.accepted', 'mail.sent'],
    );
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 6. Expiry                                                                                  */
/* ------------------------------------------------------------------------------------------ */

describe('maximum queue age', () => {
  test('a message that keeps failing, a captured sandbox message and a paused one all end failed (expired) past created_at + max age', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'down', {
      mail: () => ({ code: 451, text: '4.4.5 Insufficient system storage' }),
    });
    const clock = new ManualClock(T0);
    const p = await startPostern(s, {
      clock,
      delivery: { max_age_seconds: 3600, retry_ladder_seconds: [1800] },
    });
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const failing = await send(p.production, pk.liveKey, { subject: 'failing' });
    const captured = await send(p.sandbox, pk.testKey, { subject: 'captured' }, 'captured');
    const paused = await send(
      p.production,
      pk.liveKey,
      { subject: 'paused', paused: true },
      'paused',
    );
    await waitFor(
      async () =>
        (await messageShow(p.ctx, failing)).attempts_log.length === 1 &&
        (await statusOf(p, failing)) === 'queued',
      HANG_GUARD_MS,
      'first failure',
    );

    // Half-way: retried once more, nothing expired yet.
    clock.advance(1_800_000);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, failing)).attempts_log.length === 2 &&
        (await statusOf(p, failing)) === 'queued',
      HANG_GUARD_MS,
      'second failure',
    );
    assert.equal((await messageShow(p.ctx, failing)).next_attempt_at, iso(T0 + 3_600_000));
    assert.equal(await statusOf(p, captured), 'captured');
    assert.equal(await statusOf(p, paused), 'paused');

    // Past created_at + 1 h: every one of them ends failed.
    clock.advance(1_800_000 + 1_000);
    for (const id of [failing, captured, paused]) {
      await waitStatus(p, id, 'failed');
      const evs = await events(p, id);
      assert.deepEqual(
        evs.map((e) => e.type),
        ['mail.accepted', 'mail.failed'],
        id,
      );
      assert.equal(evs[1].data.failure.reason, 'expired');
    }
    assert.equal(sink.received.length, 0);
    assert.equal((await messageShow(p.ctx, paused)).attempts_log.length, 0);
    assert.equal((await messageShow(p.ctx, captured)).attempts_log.length, 0);
  });

  test('the last retry that would overshoot the maximum age ends the message failed (expired) at once', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'down', {
      data: () => ({ code: 452, text: '4.3.1 Insufficient system resources' }),
    });
    const clock = new ManualClock(T0);
    const p = await startPostern(s, {
      clock,
      delivery: { max_age_seconds: 3600, retry_ladder_seconds: [3000] },
    });
    const pk = await project(p);
    await attach(p, pk, sink.port);
    const id = await send(p.production, pk.liveKey);
    await waitFor(
      async () =>
        (await statusOf(p, id)) === 'queued' &&
        (await messageShow(p.ctx, id)).attempts_log.length === 1,
      HANG_GUARD_MS,
      'first failure',
    );
    clock.advance(3_000_000);
    const shown = await waitStatus(p, id, 'failed');
    assert.equal(shown.attempts_log.length, 2);
    const evs = await events(p, id);
    assert.deepEqual(
      evs.map((e) => e.type),
      ['mail.accepted', 'mail.failed'],
    );
    assert.equal(evs[1].data.failure.reason, 'expired');
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 7-8. Scheduled, released, cancelled                                                        */
/* ------------------------------------------------------------------------------------------ */

describe('scheduled, held and cancelled messages', () => {
  test('scheduled_at 10 minutes ahead: not delivered before, delivered once the clock reaches it', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const clock = new ManualClock(T0);
    const p = await startPostern(s, { clock });
    const looked = await schedulerProbe(s, p);
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const at = iso(T0 + 600_000);
    const id = await send(p.production, pk.liveKey, { scheduled_at: at }, 'scheduled');
    clock.advance(599_000);
    await looked();
    assert.equal(await statusOf(p, id), 'scheduled');
    assert.equal(sink.received.length, 0);
    assert.equal(sink.mailCount, 0);

    clock.advance(1_000);
    const shown = await waitStatus(p, id, 'sent');
    assert.equal(shown.scheduled_at, at);
    assert.equal(sink.received.length, 1);
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.outcome, a.started_at]),
      [['sent', at]],
    );
  });

  test('a paused message and a captured sandbox message are delivered once released', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const looked = await schedulerProbe(s, p);
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const paused = await send(
      p.production,
      pk.liveKey,
      { subject: 'held', paused: true },
      'paused',
    );
    const captured = await send(p.sandbox, pk.testKey, { subject: 'sandboxed' }, 'captured');
    await looked();
    assert.equal(await statusOf(p, paused), 'paused');
    assert.equal(await statusOf(p, captured), 'captured');
    assert.equal(sink.received.length, 0);

    assert.equal((await releaseMessage(p.ctx, paused)).status, 'queued');
    await waitStatus(p, paused, 'sent');
    assert.equal((await releaseMessage(p.ctx, captured)).status, 'queued');
    const shown = await waitStatus(p, captured, 'sent');
    assert.equal(shown.environment, 'sandbox');
    assert.deepEqual(
      sink.received.map((r) => /^Subject: (.*)$/m.exec(r.raw.toString('utf8'))![1].trim()),
      ['held', 'sandboxed'],
    );
    for (const id of [paused, captured])
      assert.deepEqual(
        (await events(p, id)).map((e) => e.type),
        ['mail.accepted', 'mail.sent'],
      );
  });

  test('a cancelled scheduled message is never delivered', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const clock = new ManualClock(T0);
    const p = await startPostern(s, { clock });
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const cancelled = await send(
      p.production,
      pk.liveKey,
      { subject: 'cancel me', scheduled_at: iso(T0 + 600_000) },
      'scheduled',
    );
    const kept = await send(
      p.production,
      pk.liveKey,
      { subject: 'keep me', scheduled_at: iso(T0 + 600_000) },
      'scheduled',
    );
    assert.equal((await cancelMessage(p.ctx, cancelled)).status, 'cancelled');
    clock.advance(600_000);
    // The look that leased the one kept, due at the same time, passed over the cancelled one.
    await waitStatus(p, kept, 'sent');
    assert.equal(await statusOf(p, cancelled), 'cancelled');
    assert.equal((await messageShow(p.ctx, cancelled)).attempts_log.length, 0);
    assert.deepEqual(
      sink.received.map((r) => /^Subject: (.*)$/m.exec(r.raw.toString('utf8'))![1].trim()),
      ['keep me'],
    );
    assert.deepEqual(
      (await events(p, cancelled)).map((e) => e.type),
      ['mail.accepted'],
    );
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 9. Recipient-level outcomes                                                                */
/* ------------------------------------------------------------------------------------------ */

describe('recipient-level outcomes', () => {
  test('one RCPT refused 550: sent to the other, the refused one bounced, suppressed, and refused at the HTTP door next time', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay', {
      rcpt: (to) => (to === 'gone@example.org' ? { code: 550, text: '5.1.1 No such user' } : null),
    });
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const id = await send(p.production, pk.liveKey, { to: ['ok@example.org', 'gone@example.org'] });
    const shown = await waitStatus(p, id, 'sent');
    assert.equal(sink.received.length, 1);
    assert.deepEqual(sink.received[0].to, ['ok@example.org']);
    assert.deepEqual(shown.recipient_outcomes, [
      { email: 'gone@example.org', status: 'bounced', reply: '550 5.1.1 No such user' },
    ]);
    assert.deepEqual(
      shown.attempts_log.map((a) => a.outcome),
      ['sent'],
    );

    const evs = await events(p, id);
    assert.deepEqual(evs.map((e) => e.type).sort(), ['mail.accepted', 'mail.bounced', 'mail.sent']);
    const bounce = evs.find((e) => e.type === 'mail.bounced')!;
    assert.equal(bounce.data.bounce.recipient, 'gone@example.org');

    assert.deepEqual(
      (await suppressionList(p.ctx, pk.project.id)).suppressions.map((x) => [x.email, x.reason]),
      [['gone@example.org', 'hard_bounce']],
    );
    const res = await post(p.production, '/v1/send', {
      key: pk.liveKey,
      json: validMessage({ to: 'Gone@Example.org' }),
    });
    assertErrorEnvelope(res, 422, 'validation_error', 'suppressed_recipient');
    assert.match(res.body.error.message, /gone@example\.org/);
  });

  test('one RCPT deferred with 450: that recipient is not bounced nor suppressed (a 4xx is temporary)', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay', {
      rcpt: (to) =>
        to === 'busy@example.org' ? { code: 450, text: '4.2.1 Mailbox busy, try later' } : null,
    });
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, sink.port);

    const id = await send(p.production, pk.liveKey, { to: ['ok@example.org', 'busy@example.org'] });
    // The hand-off's outcome (recipients, suppressions, events) is recorded in one write.
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length >= 1 &&
        (await statusOf(p, id)) !== 'sending',
      HANG_GUARD_MS,
      'first hand-off',
    );
    assert.deepEqual(
      sink.received.map((r) => r.to),
      [['ok@example.org']],
    );
    const shown = await messageShow(p.ctx, id);
    assert.deepEqual(
      shown.recipient_outcomes.filter((r) => r.status === 'bounced'),
      [],
    );
    assert.deepEqual((await suppressionList(p.ctx, pk.project.id)).suppressions, []);
    assert.ok(
      !(await events(p, id)).some((e) => e.type === 'mail.bounced'),
      'no mail.bounced for a 4xx',
    );
    const res = await post(p.production, '/v1/send', {
      key: pk.liveKey,
      json: validMessage({ to: 'busy@example.org' }),
    });
    assertAccepted(res);
  });

  test('every RCPT refused 550: the message fails permanently, each recipient bounced, no failover', async (t) => {
    const s = scope(t);
    const other = await startSink(s, 'other');
    const sink = await startSink(s, 'relay', {
      rcpt: () => ({ code: 550, text: '5.1.1 No such user' }),
    });
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, sink.port, { priority: '1' });
    await attach(p, pk, other.port, { slug: 'provider-b-smtp', priority: '2' });

    const id = await send(p.production, pk.liveKey, { to: ['x@example.org', 'y@example.org'] });
    const shown = await waitStatus(p, id, 'failed');
    assert.deepEqual(
      shown.recipient_outcomes.map((r) => [r.email, r.status]),
      [
        ['x@example.org', 'bounced'],
        ['y@example.org', 'bounced'],
      ],
    );
    assert.equal(other.received.length, 0);
    const types = (await events(p, id)).map((e) => e.type);
    assert.equal(types.filter((x) => x === 'mail.bounced').length, 2);
    assert.ok(types.includes('mail.failed'));
  });

  test('a recipient suppressed after acceptance gets mail.suppressed and is not delivered; the others are', async (t) => {
    const s = scope(t);
    const sink = await startSink(s, 'relay');
    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, sink.port);

    await setPaused(p.ctx, pk.project.id, true);
    const both = await send(
      p.production,
      pk.liveKey,
      { to: ['keep@example.org', 'drop@example.org'] },
      'paused',
    );
    const only = await send(
      p.production,
      pk.liveKey,
      { to: 'drop@example.org', subject: 'only' },
      'paused',
    );
    await suppress(p.ctx, pk.project.id, 'Drop@example.org');
    await setPaused(p.ctx, pk.project.id, false);

    const shownBoth = await waitStatus(p, both, 'sent');
    const shownOnly = await waitStatus(p, only, 'suppressed');
    assert.equal(sink.received.length, 1);
    assert.deepEqual(sink.received[0].to, ['keep@example.org']);

    assert.deepEqual(
      shownBoth.recipient_outcomes.map((r) => [r.email, r.status]),
      [['drop@example.org', 'suppressed']],
    );
    const evBoth = await events(p, both);
    assert.deepEqual(
      evBoth.map((e) => e.type),
      ['mail.accepted', 'mail.suppressed', 'mail.sent'],
    );
    assert.equal(evBoth[1].data.suppressed.recipient, 'drop@example.org');

    assert.deepEqual(
      shownOnly.recipient_outcomes.map((r) => [r.email, r.status]),
      [['drop@example.org', 'suppressed']],
    );
    assert.deepEqual(shownOnly.attempts_log, []);
    assert.deepEqual(
      (await events(p, only)).map((e) => e.type),
      ['mail.accepted', 'mail.suppressed'],
    );
  });
});

/* ------------------------------------------------------------------------------------------ */
/* 10. Postfix smtp-sink                                                                      */
/* ------------------------------------------------------------------------------------------ */

describe("Postfix's smtp-sink as the next hop", () => {
  test('20 messages relayed to smtp-sink all end sent, each captured once', async (t) => {
    const s = scope(t);
    const port = await closedPort();
    const dumpDir = s.add(mkdtempSync(path.join(tmpdir(), 'postern-smtp-sink-')), (d) =>
      rmSync(d, { recursive: true, force: true }),
    );
    chmodSync(dumpDir, 0o777);
    // As root smtp-sink must drop privileges (-u); -d dumps each transaction to its own file.
    const args = [
      ...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []),
      '-d',
      `${dumpDir}/%M.`,
      `127.0.0.1:${port}`,
      '100',
    ];
    const child: ChildProcess = s.add(
      spawn('/usr/sbin/smtp-sink', args, { stdio: ['ignore', 'ignore', 'pipe'] }),
      async (c) => {
        if (c.exitCode === null && c.signalCode === null) {
          const exited = new Promise((r) => c.once('exit', r));
          c.kill('SIGTERM');
          await exited;
        }
      },
    );
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    await waitFor(
      () =>
        new Promise<boolean>((resolve) => {
          const socket = net.connect(port, '127.0.0.1', () => {
            socket.destroy();
            resolve(true);
          });
          socket.on('error', () => resolve(false));
        }),
      HANG_GUARD_MS,
      `smtp-sink listening (${stderr})`,
    );

    const p = await startPostern(s, { clock: new ManualClock(T0) });
    const pk = await project(p);
    await attach(p, pk, port);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++)
      ids.push(
        await send(p.production, pk.liveKey, { subject: `sink ${i}`, to: `r${i}@example.org` }),
      );
    for (const id of ids) {
      const shown = await waitStatus(p, id, 'sent');
      assert.equal(shown.provider, 'smtp');
      assert.deepEqual(
        shown.attempts_log.map((a) => a.outcome),
        ['sent'],
      );
    }
    const dumps = await waitFor(
      () => {
        const files = readdirSync(dumpDir, { recursive: true, withFileTypes: true }).filter((d) =>
          d.isFile(),
        );
        return files.length === 20 ? files : null;
      },
      HANG_GUARD_MS,
      'smtp-sink dump files',
    );
    const rcpts = dumps
      .map(
        (d) =>
          /^X-Rcpt-Args: <?([^>\s]+)>?/m.exec(
            readFileSync(path.join(d.parentPath ?? d.path, d.name), 'utf8'),
          )![1],
      )
      .sort();
    assert.deepEqual(rcpts, Array.from({ length: 20 }, (_, i) => `r${i}@example.org`).sort());
  });
});
