/**
 * provider-c-api (Mailgun `messages.mime`) against a Mailgun emulator on 127.0.0.1: messages come
 * in over real HTTP into an in-process Postern with delivery on, the adapter posts the stored
 * MIME to the emulator, and Mailgun's signed webhooks come back over real HTTP to
 * `/v1/feedback/<account>`. Time-dependent rules (retry ladder, throttle reset, webhook
 * staleness) run on a ManualClock while the poll loop runs on real timers.
 */
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { ManualClock } from '../../src/clock.js';
import { addDkimKey } from '../../src/operator/dkim.js';
import { messageShow } from '../../src/operator/messages.js';
import {
  attacherFor,
  attemptOutcomes,
  deliveringPostern,
  eventData,
  eventTypes,
  failsWithoutFailover,
  filledFixture,
  providerFixture,
  restsThrottledAccount,
  sendOver,
  startedFor,
  statusReached,
  suppressions,
  T0,
} from '../support/emulators/harness.js';
import {
  parseMultipart,
  signedMailgunWebhook,
  startMailgunEmulator,
} from '../support/emulators/mailgun.js';
import { createProjectWithKeys } from '../support/postern.js';
import { schedulerProbe } from '../support/probes.js';
import { type ProviderEmulator, postFeedback } from '../support/providerEmulator.js';
import { storedMimeOf } from '../support/storedMime.js';
import { HANG_GUARD_MS, scope, waitFor } from '../support/waiting.js';

const API_KEY = 'key-3ax6xnjp29jd6fds4gc373sgvjxteol0';
const DOMAIN = 'mg.example.com';
const SIGNING_KEY = 'whsec-mailgun-signing-key-4f1c2d';

type Scope = ReturnType<typeof scope>;

async function emulator(
  s: Scope,
  opts: { apiKey?: string; domain?: string; retryAfterSeconds?: number } = {},
): Promise<ProviderEmulator> {
  return startedFor(
    s,
    startMailgunEmulator({
      apiKey: opts.apiKey ?? API_KEY,
      domain: opts.domain ?? DOMAIN,
      retryAfterSeconds: opts.retryAfterSeconds,
    }),
  );
}

const attach = attacherFor('provider-c-api', {
  apiKey: API_KEY,
  domain: DOMAIN,
  webhookSecret: SIGNING_KEY,
});

/** A documented webhook sample with its placeholders filled, signed as Mailgun signs (HMAC-SHA256 of timestamp + token). */
function webhook(
  name: string,
  vars: Record<string, string | number>,
  opts: { key?: string; timestamp?: number; token?: string } = {},
): string {
  const timestamp = String(opts.timestamp ?? Math.floor(T0 / 1000));
  const token = opts.token ?? randomBytes(25).toString('hex');
  const signature = createHmac('sha256', opts.key ?? SIGNING_KEY)
    .update(timestamp + token)
    .digest('hex');
  const all: Record<string, string | number> = {
    timestamp,
    token,
    signature,
    event_timestamp: T0 / 1000 + 0.153125,
    ...vars,
  };
  return filledFixture('c', name, all);
}

const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

describe('provider-c-api sends through Mailgun messages.mime', () => {
  test('the request is the documented messages.mime call: basic auth, every envelope recipient as `to`, the stored MIME with its DKIM signature as is, tags and user variables', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(T0);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, clock);
    const pk = await createProjectWithKeys(p.ctx, 'mailgun', 'pro', { provider: false });
    const key = await addDkimKey(p.ctx, pk.project.id, {
      domain: 'example.com',
      selector: 'pm2026',
    });
    const account = await attach(p, pk, emu);

    const id = await sendOver(p, pk, {
      from: 'Sender Name <sender@example.com>',
      to: ['Ann <ann@example.org>', 'bob@example.org'],
      cc: 'cc@example.org',
      bcc: 'hidden@example.net',
      reply_to: 'Support <support@example.com>',
      subject: 'Your receipt',
      text: 'Thanks for your order.',
      html: '<p>Thanks for your order.</p><img src="cid:logo">',
      headers: { 'X-Campaign': 'spring' },
      attachments: [
        {
          filename: 'receipt.txt',
          content: Buffer.from('order 1234: paid').toString('base64'),
          content_type: 'text/plain',
        },
        {
          filename: 'logo.png',
          content: PNG_1X1,
          content_type: 'image/png',
          content_id: 'logo',
          disposition: 'inline',
        },
      ],
      category: 'receipts',
      tags: ['welcome', 'onboarding', 'spring'],
      metadata: { order: '1234', customer: 'c-42' },
    });
    const shown = await statusReached(p, id, 'sent');

    assert.equal(emu.requests.length, 1);
    const req = emu.requests[0];
    const golden = JSON.parse(providerFixture('c', 'messages-mime.request.json'));
    assert.equal(req.method, golden.method);
    assert.equal(req.url, golden.path);
    const boundary = /boundary=(\S+)/.exec(req.headers['content-type'] ?? '')![1];
    for (const [name, value] of Object.entries(golden.headers as Record<string, string>)) {
      assert.equal(req.headers[name], value.replace('{{boundary}}', boundary), `header ${name}`);
    }
    const fields = parseMultipart(req.body, req.headers['content-type']);
    const messagePart = fields.find((f) => f.name === 'message')!;
    assert.deepEqual(
      fields.map((f) => ({
        name: f.name,
        filename: f.filename,
        contentType: f.contentType,
        value:
          f.name === 'message' ? '{{dkim_signature}}{{stored_mime}}' : f.value.toString('utf8'),
      })),
      (golden.fields as { value: string }[]).map((f) => ({
        ...f,
        value: f.value.replace('{{message_id}}', id),
      })),
    );

    // The message part is the spooled file, byte for byte, behind the DKIM-Signature header
    // prepended at hand-off; and that signature verifies over what Mailgun received.
    const stored = await storedMimeOf(p.ctx.store, p.stateDir, shown.id);
    const text = messagePart.value.toString('latin1');
    assert.match(
      text,
      /^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=example\.com;\r\n[\s\S]*? s=pm2026;/,
    );
    const signatureLength = messagePart.value.length - stored.length;
    assert.ok(signatureLength > 0);
    assert.ok(
      messagePart.value.subarray(signatureLength).equals(stored),
      'the stored MIME follows the signature unchanged',
    );
    assert.match(
      messagePart.value.subarray(0, signatureLength).toString('latin1'),
      /^DKIM-Signature: [\s\S]*\r\n$/,
    );
    const headerBlock = stored.toString('latin1').split('\r\n\r\n')[0];
    assert.doesNotMatch(headerBlock, /hidden@example\.net/, 'Bcc only in the envelope');
    const verified = await dkimVerify(messagePart.value, {
      resolver: async (name: string, rrtype: string) => {
        if (rrtype === 'TXT' && name === key.dns_name) return [[key.dns_value]];
        throw Object.assign(new Error(`no ${rrtype} ${name}`), { code: 'ENOTFOUND' });
      },
    });
    assert.deepEqual(
      verified.results.map((r: { status: { result: string } }) => r.status.result),
      ['pass'],
    );

    // Mailgun keeps the MIME's Message-ID and answers it as the id: stored without brackets.
    const providerId = `${id}@example.com`;
    assert.equal(shown.provider, 'provider-c-api');
    assert.equal(shown.provider_message_id, providerId);
    assert.deepEqual(
      shown.attempts_log.map((a) => [
        a.provider_account_id,
        a.outcome,
        a.provider_message_id,
        a.reply,
      ]),
      [
        [
          account.id,
          'sent',
          providerId,
          `200 {"id":"<${providerId}>","message":"Queued. Thank you."}`,
        ],
      ],
    );
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent']);
    assert.equal((await eventData(p, id, 'mail.sent')).provider_message_id, providerId);
  });

  test('a large message (over 256 KB, streamed at hand-off from its spool file or its database pieces) arrives whole behind its signature, the form in the same order', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(T0);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, clock);
    const pk = await createProjectWithKeys(p.ctx, 'mailgun-large', 'pro', { provider: false });
    const key = await addDkimKey(p.ctx, pk.project.id, { domain: 'example.com', selector: 'big' });
    await attach(p, pk, emu);
    const attachment = Buffer.alloc(600 * 1024, 7).toString('base64');
    const id = await sendOver(p, pk, {
      to: ['ann@example.org', 'bob@example.org'],
      tags: ['big'],
      metadata: { size: 'large' },
      attachments: [
        { filename: 'big.bin', content: attachment, content_type: 'application/octet-stream' },
      ],
    });
    await statusReached(p, id, 'sent');

    const req = emu.requests[0];
    const fields = parseMultipart(req.body, req.headers['content-type']);
    assert.deepEqual(
      fields.map((f) => f.name),
      ['to', 'to', 'message', 'o:tag', 'v:size', 'v:postern_message_id'],
    );
    const messagePart = fields.find((f) => f.name === 'message')!;
    assert.deepEqual(
      [messagePart.filename, messagePart.contentType],
      ['message.mime', 'message/rfc822'],
    );
    const stored = await storedMimeOf(p.ctx.store, p.stateDir, id);
    assert.ok(stored.length > 256 * 1024);
    const signatureLength = messagePart.value.length - stored.length;
    assert.ok(
      signatureLength > 0 && messagePart.value.subarray(signatureLength).equals(stored),
      'the stored MIME follows the signature unchanged',
    );
    const verified = await dkimVerify(messagePart.value, {
      resolver: async (name: string, rrtype: string) => {
        if (rrtype === 'TXT' && name === key.dns_name) return [[key.dns_value]];
        throw Object.assign(new Error(`no ${rrtype} ${name}`), { code: 'ENOTFOUND' });
      },
    });
    assert.deepEqual(
      verified.results.map((r: { status: { result: string } }) => r.status.result),
      ['pass'],
    );
  });

  test('the account’s domain is in the path: a key that does not own it gets Mailgun’s 404, an account-level failure', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(T0);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, clock);
    const pk = await createProjectWithKeys(p.ctx, 'mailgun-domain', 'pro', { provider: false });
    const wrongDomain = await attach(p, pk, emu, { domain: 'other.example.com', priority: '1' });
    const good = await attach(p, pk, emu, { priority: '2' });
    const id = await sendOver(p, pk);
    await statusReached(p, id, 'sent');
    assert.deepEqual(await attemptOutcomes(p, id), [
      [wrongDomain.id, 'account'],
      [good.id, 'sent'],
    ]);
    assert.match(
      (await messageShow(p.ctx, id)).attempts_log[0].reply ?? '',
      /^404 \{"message":"Domain not found: other\.example\.com"\}/,
    );
  });
});

describe('provider-c-api errors drive the delivery engine', () => {
  test('429 with Retry-After: the next account takes it, and the throttled account is not tried again before the reset', async (t) => {
    const reply = await restsThrottledAccount(
      t,
      { attach },
      (s) => emulator(s, { retryAfterSeconds: 120 }),
      (s) => emulator(s),
      120_000,
    );
    assert.match(reply ?? '', /^429 \{"message":"Too many requests"\}/);
  });

  test('429 without a reset header on the only account, then 503: queued on the retry ladder, sent when due', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(T0);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, clock);
    const looked = await schedulerProbe(s, p);
    const pk = await createProjectWithKeys(p.ctx, 'ladder', 'pro', { provider: false });
    const a = await attach(p, pk, emu);

    emu.behave('throttle', 1).behave('server_error', 1);
    const id = await sendOver(p, pk);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length === 1 &&
        (await messageShow(p.ctx, id)).status === 'queued',
      HANG_GUARD_MS,
      'first attempt',
    );
    assert.equal(
      (await messageShow(p.ctx, id)).next_attempt_at,
      new Date(T0 + 60_000).toISOString(),
    );
    await looked();
    assert.equal(emu.requests.length, 1);
    assert.equal((await messageShow(p.ctx, id)).status, 'queued');
    clock.advance(60_000);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length === 2 &&
        (await messageShow(p.ctx, id)).status === 'queued',
      HANG_GUARD_MS,
      'second attempt',
    );
    assert.match(
      (await messageShow(p.ctx, id)).last_error ?? '',
      /^provider-c-api: 503 \{"message":"Service Unavailable"\}/,
    );
    clock.advance(60_000);
    await statusReached(p, id, 'sent');
    assert.deepEqual(await attemptOutcomes(p, id), [
      [a.id, 'temporary'],
      [a.id, 'temporary'],
      [a.id, 'sent'],
    ]);
  });

  test('5xx, a bad key (401 Forbidden) and a domain not allowed to send (403) each fail over to the next account', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(T0);
    const down = await emulator(s);
    const wrongKey = await emulator(s, { apiKey: 'key-someone-else' });
    const sandbox = await emulator(s);
    const good = await emulator(s);
    const p = await deliveringPostern(s, clock);
    const pk = await createProjectWithKeys(p.ctx, 'failover', 'pro', { provider: false });
    const a = await attach(p, pk, down, { priority: '1' });
    const b = await attach(p, pk, wrongKey, { priority: '2' });
    const c = await attach(p, pk, sandbox, { priority: '3' });
    const d = await attach(p, pk, good, { priority: '4' });
    down.behave('server_error', 1);
    sandbox.behave('suspended', 1);

    const id = await sendOver(p, pk);
    const shown = await statusReached(p, id, 'sent');
    assert.deepEqual(await attemptOutcomes(p, id), [
      [a.id, 'temporary'],
      [b.id, 'account'],
      [c.id, 'account'],
      [d.id, 'sent'],
    ]);
    assert.deepEqual(
      shown.attempts_log.slice(1, 3).map((x) => x.reply),
      [
        '401 Forbidden',
        '403 {"message":"Domain mg.example.com is not allowed to send: Free accounts are for test purposes only. Please upgrade or add the address to authorized recipients in Account Settings."}',
      ],
    );
  });

  test('a 400 refusing the message ends it failed, without trying another account', async (t) => {
    const lastError = await failsWithoutFailover(t, { start: (s) => emulator(s), attach });
    assert.match(lastError ?? '', /^400 \{"message":"'from' parameter is not a valid address/);
  });
});

describe('Mailgun webhooks at /v1/feedback/<account>', () => {
  async function sent(s: Scope) {
    const clock = new ManualClock(T0);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, clock);
    const pk = await createProjectWithKeys(p.ctx, 'feedback', 'pro', { provider: false });
    const account = await attach(p, pk, emu);
    const id = await sendOver(p, pk, {
      to: ['Ann <ann@example.org>', 'bob@example.org'],
      cc: 'cc@example.org',
      bcc: 'dan@example.net',
    });
    const providerId = (await statusReached(p, id, 'sent')).provider_message_id!;
    const deliver = (body: string) => postFeedback(p.production, account.id, body);
    return { clock, p, pk, account, id, providerId, deliver };
  }

  test('signed delivered, permanent failure, temporary failure and complaint samples become exactly the normalized events and suppressions', async (t) => {
    const s = scope(t);
    const { p, pk, id, providerId, deliver } = await sent(s);
    const vars = (recipient: string) => ({
      recipient,
      provider_message_id: providerId,
      postern_message_id: id,
    });

    let res = await deliver(webhook('webhook-delivered', vars('ann@example.org')));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent', 'mail.delivered']);
    const delivered = await eventData(p, id, 'mail.delivered');
    assert.deepEqual(delivered.delivery, {
      recipient: 'ann@example.org',
      provider: 'provider-c-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:00.153Z',
      reply: 'OK',
    });
    assert.equal((await messageShow(p.ctx, id)).status, 'delivered');

    res = await deliver(webhook('webhook-failed-permanent', vars('bob@example.org')));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    const bounce = (await eventData(p, id, 'mail.bounced')).bounce;
    assert.deepEqual(bounce, {
      recipient: 'bob@example.org',
      provider: 'provider-c-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:00.153Z',
      type: 'hard',
      subtype: 'bounce',
      reply: '5.1.1 The email account that you tried to reach does not exist.',
    });

    res = await deliver(webhook('webhook-failed-temporary', vars('dan@example.net')));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });

    res = await deliver(webhook('webhook-complained', vars('cc@example.org')));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual((await eventData(p, id, 'mail.complained')).complaint, {
      recipient: 'cc@example.org',
      provider: 'provider-c-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:00.153Z',
      feedback_type: 'complained',
    });

    // A soft bounce is recorded on the message only: no event, no suppression.
    assert.deepEqual(await eventTypes(p, id), [
      'mail.accepted',
      'mail.sent',
      'mail.delivered',
      'mail.bounced',
      'mail.complained',
    ]);
    assert.deepEqual(
      (await messageShow(p.ctx, id)).recipient_outcomes.map((o) => [o.email, o.status, o.reply]),
      [
        ['ann@example.org', 'delivered', 'OK'],
        [
          'bob@example.org',
          'bounced',
          '5.1.1 The email account that you tried to reach does not exist.',
        ],
        ['cc@example.org', 'complained', 'complained'],
        ['dan@example.net', 'soft_bounced', 'No MX for example.org'],
      ],
    );
    assert.deepEqual((await suppressions(p, pk)).sort(), [
      ['bob@example.org', 'hard_bounce'],
      ['cc@example.org', 'complaint'],
    ]);
    assert.equal((await messageShow(p.ctx, id)).status, 'complained');
  });

  test('a rejected event is mail.failed for the recipient its headers name; opens are acknowledged without effect', async (t) => {
    const s = scope(t);
    const { p, id, providerId, deliver } = await sent(s);
    let res = await deliver(
      webhook('webhook-opened', {
        recipient: 'ann@example.org',
        provider_message_id: providerId,
        postern_message_id: id,
      }),
    );
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      received: 0,
      applied: 0,
      duplicates: 0,
      unknown: 0,
      note: 'mailgun "opened" events are not delivery feedback',
    });
    res = await deliver(
      webhook('webhook-rejected', {
        recipient: 'Ann <ann@example.org>',
        provider_message_id: providerId,
        postern_message_id: id,
      }),
    );
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent', 'mail.failed']);
    assert.deepEqual((await eventData(p, id, 'mail.failed')).failure, {
      reason: 'provider_rejected',
      message: 'Sandbox subdomains are for test purposes only.',
      recipient: 'ann@example.org',
      provider: 'provider-c-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:00.153Z',
    });
    assert.equal((await messageShow(p.ctx, id)).status, 'failed');
  });

  test('the same event again (re-signed, as Mailgun retries) applies once; an unknown message id is acknowledged; a provider id we never stored falls back to our user variable, else to our Message-ID', async (t) => {
    const s = scope(t);
    const { p, pk, id, providerId, deliver } = await sent(s);
    const body = () =>
      webhook('webhook-failed-permanent', {
        recipient: 'bob@example.org',
        provider_message_id: providerId,
        postern_message_id: id,
      });
    assert.deepEqual((await deliver(body())).body, {
      received: 1,
      applied: 1,
      duplicates: 0,
      unknown: 0,
    });
    assert.deepEqual((await deliver(body())).body, {
      received: 1,
      applied: 0,
      duplicates: 1,
      unknown: 0,
    });
    assert.equal((await eventTypes(p, id)).filter((e) => e === 'mail.bounced').length, 1);

    const unknown = await deliver(
      webhook('webhook-delivered', {
        recipient: 'ann@example.org',
        provider_message_id: '20260302.nobody@mg.example.com',
        postern_message_id: 'm.unknown',
      }),
    );
    assert.equal(unknown.status, 200);
    assert.deepEqual(unknown.body, { received: 1, applied: 0, duplicates: 0, unknown: 1 });
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent', 'mail.bounced']);

    const byVariable = await deliver(
      webhook('webhook-delivered', {
        recipient: 'ann@example.org',
        provider_message_id: 'rewritten@mg.example.com',
        postern_message_id: id,
      }),
    );
    assert.deepEqual(byVariable.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });

    // Without user variables (a provider-c-smtp send), the Message-ID we wrote names the message.
    const event = JSON.parse(
      webhook('webhook-delivered', {
        recipient: 'cc@example.org',
        provider_message_id: `${id}@example.com`,
        postern_message_id: id,
      }),
    )['event-data'];
    delete event['user-variables'];
    event.id = 'smtp-sent-delivery';
    const byHeader = await deliver(
      signedMailgunWebhook(event, SIGNING_KEY, { timestamp: Math.floor(T0 / 1000) }),
    );
    assert.deepEqual(byHeader.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual(await eventTypes(p, id), [
      'mail.accepted',
      'mail.sent',
      'mail.bounced',
      'mail.delivered',
      'mail.delivered',
    ]);
    assert.deepEqual(await suppressions(p, pk), [['bob@example.org', 'hard_bounce']]);
  });

  test('a bad signature, a stale timestamp, a replayed token and a body that is not JSON are refused and change nothing', async (t) => {
    const s = scope(t);
    const { p, pk, id, providerId, deliver } = await sent(s);
    const vars = {
      recipient: 'bob@example.org',
      provider_message_id: providerId,
      postern_message_id: id,
    };
    const before = {
      events: await eventTypes(p, id),
      outcomes: (await messageShow(p.ctx, id)).recipient_outcomes,
    };

    const token = 'f'.repeat(50);
    const forged = await deliver(
      webhook('webhook-failed-permanent', vars, { key: 'not-the-signing-key', token }),
    );
    assert.equal(forged.status, 401);
    assert.deepEqual(forged.body, {
      error: {
        type: 'authentication_error',
        code: 'feedback:unauthenticated',
        message: 'the signature does not match the webhook signing key',
      },
    });

    // The signature covers timestamp and token only, so the timestamp is what keeps an old
    // signed request from being posted again later.
    const stale = await deliver(
      webhook('webhook-failed-permanent', vars, { timestamp: Math.floor(T0 / 1000) - 301, token }),
    );
    assert.equal(stale.status, 401);
    assert.equal(stale.body.error.code, 'feedback:stale');
    const future = await deliver(
      webhook('webhook-failed-permanent', vars, { timestamp: Math.floor(T0 / 1000) + 301, token }),
    );
    assert.equal(future.body.error.code, 'feedback:stale');

    const notJson = await deliver('timestamp=1&token=x&signature=y');
    assert.equal(notJson.status, 400);
    assert.equal(notJson.body.error.code, 'feedback:malformed');

    assert.deepEqual(
      {
        events: await eventTypes(p, id),
        outcomes: (await messageShow(p.ctx, id)).recipient_outcomes,
      },
      before,
    );
    assert.deepEqual(await suppressions(p, pk), []);

    // Refusals consume no token: the genuine notification with that token applies, once.
    const genuine = webhook('webhook-failed-permanent', vars, { token });
    assert.deepEqual((await deliver(genuine)).body, {
      received: 1,
      applied: 1,
      duplicates: 0,
      unknown: 0,
    });
    const replay = await deliver(genuine);
    assert.equal(replay.status, 406);
    assert.deepEqual(replay.body, {
      error: {
        type: 'authentication_error',
        code: 'feedback:replayed',
        message: 'this signature token was already used',
      },
    });
    assert.deepEqual(await eventTypes(p, id), [...before.events, 'mail.bounced']);
    assert.deepEqual(await suppressions(p, pk), [['bob@example.org', 'hard_bounce']]);
  });
});
