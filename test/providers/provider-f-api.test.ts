/**
 * provider-f-api (Brevo `POST /v3/smtp/email`) against a Brevo emulator on 127.0.0.1: messages
 * come in over real HTTP into an in-process Postern with delivery on, the adapter maps the
 * stored MIME to Brevo's JSON, and Brevo's transactional webhooks come back over real HTTP to
 * `/v1/feedback/<account>[/<secret>]`, authenticated by the secret (token path, basic auth in
 * the URL, or Brevo's bearer token).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { messageShow, releaseMessage } from '../../src/operator/messages.js';
import { attachProvider } from '../../src/operator/providers.js';
import { suppress } from '../../src/operator/suppressions.js';
import { type BrevoEmulatorOptions, startBrevoEmulator } from '../support/emulators/brevo.js';
import {
  attacherFor,
  attemptOutcomes,
  requestJson as bodyOf,
  deliveringPostern,
  eventData,
  eventTypes,
  failsWithoutFailover,
  filledFixture,
  providerFixture,
  restsThrottledAccount,
  retryWaitsForReset,
  sendOver,
  startedFor,
  statusReached,
  suppressions,
  T0,
} from '../support/emulators/harness.js';
import { createProjectWithKeys } from '../support/postern.js';
import { type ProviderEmulator, postFeedback } from '../support/providerEmulator.js';
import { scope } from '../support/waiting.js';

const API_KEY =
  'xkeysib-0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5-AbCdEfGhIjKlMnOp';
const WEBHOOK_SECRET = 'brevo-hook-2b8f0c61d9';

type Scope = ReturnType<typeof scope>;

async function emulator(
  s: Scope,
  opts: Partial<BrevoEmulatorOptions> = {},
): Promise<ProviderEmulator> {
  return startedFor(s, startBrevoEmulator({ apiKey: API_KEY, ...opts }));
}

const attach = attacherFor('provider-f-api', { apiKey: API_KEY, webhookSecret: WEBHOOK_SECRET });

/** A documented webhook sample with its placeholders filled (as JSON string content). */
function webhook(
  name: string,
  vars: { recipient: string; provider_message_id: string; postern_message_id: string },
): string {
  const values: Record<string, string> = {
    ...vars,
    x_mailin_custom: JSON.stringify({ postern_message_id: vars.postern_message_id }),
  };
  return filledFixture('f', name, values, (value) => JSON.stringify(value).slice(1, -1));
}

const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

describe('provider-f-api sends through Brevo /v3/smtp/email', () => {
  test('the request is the documented transactional email: api-key, sender, to/cc/bcc with names, replyTo, subject, both bodies, attachments, custom headers, tags', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'brevo', 'pro', { provider: false });
    const account = await attach(p, pk, emu);

    const id = await sendOver(p, pk, {
      from: 'Sender Alex <senderalex@example.com>',
      to: 'John Doe <testmail@example.com>',
      cc: 'Copy Reader <copied@example.com>',
      bcc: 'hidden@example.net',
      reply_to: 'Ann <ann6533@example.com>',
      subject: 'Hello world',
      html: '<html><head></head><body><p>Hello,</p>This is my first transactional email sent from Brevo.<img src="cid:logo"></p></body></html>',
      text: 'Hello, this is my first transactional email sent from Brevo.',
      headers: { 'X-Campaign': 'spring' },
      attachments: [
        {
          filename: 'myAttachmentFromBase64.jpg',
          content: 'dGVzdCBjb250ZW50',
          content_type: 'image/jpeg',
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
      tags: ['tag1', 'tag2'],
      metadata: { order: '1234' },
    });
    const shown = await statusReached(p, id, 'sent');

    assert.equal(emu.requests.length, 1);
    const req = emu.requests[0];
    const golden = JSON.parse(providerFixture('f', 'smtp-email.request.json'));
    assert.equal(req.method, golden.method);
    assert.equal(req.url, golden.path);
    for (const [name, value] of Object.entries(golden.headers as Record<string, string>))
      assert.equal(req.headers[name], value, `header ${name}`);
    assert.deepEqual(
      bodyOf(emu, 0),
      JSON.parse(JSON.stringify(golden.body).replace('{{message_id}}', id)),
    );

    // 201 {"messageId": "<…@smtp-relay.mailin.fr>"}: stored as Brevo quotes it in webhooks.
    const messageId = JSON.parse(shown.attempts_log[0].reply!.replace(/^201 /, '')).messageId;
    assert.match(messageId, /^<202603021000\.\d{11}@smtp-relay\.mailin\.fr>$/);
    assert.equal(shown.provider, 'provider-f-api');
    assert.equal(shown.provider_message_id, messageId);
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.provider_account_id, a.outcome, a.provider_message_id]),
      [[account.id, 'sent', messageId]],
    );
  });

  test('owing only Bcc recipients, each gets a message version addressed to them alone; owing only Cc, the Cc become the To', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'brevo-bcc', 'pro', { provider: false });
    await attach(p, pk, emu);
    const bccOnly = await sendOver(
      p,
      pk,
      { to: 'gone@example.org', bcc: ['b1@example.net', 'b2@example.net'], paused: true },
      'paused',
    );
    const ccOnly = await sendOver(
      p,
      pk,
      { to: 'gone@example.org', cc: ['C One <c1@example.net>', 'c2@example.net'], paused: true },
      'paused',
    );
    await suppress(p.ctx, pk.project.id, 'gone@example.org');
    await releaseMessage(p.ctx, bccOnly);
    const shown = await statusReached(p, bccOnly, 'sent');
    await releaseMessage(p.ctx, ccOnly);
    await statusReached(p, ccOnly, 'sent');

    const first = bodyOf(emu, 0);
    assert.equal(first.to, undefined);
    assert.equal(first.bcc, undefined);
    assert.deepEqual(first.messageVersions, [
      { to: [{ email: 'b1@example.net' }] },
      { to: [{ email: 'b2@example.net' }] },
    ]);
    // `messageIds` for versions: the first is the message's id.
    assert.match(
      shown.provider_message_id ?? '',
      /^<202603021000\.\d{11}@smtp-relay\.mailin\.fr>$/,
    );
    const second = bodyOf(emu, 1);
    assert.deepEqual(second.to, [
      { email: 'c1@example.net', name: 'C One' },
      { email: 'c2@example.net' },
    ]);
    assert.equal(second.cc, undefined);
  });
});

describe('provider-f-api errors drive the delivery engine', () => {
  test('429 with x-sib-ratelimit-reset: the next account takes it, and the throttled one is left alone until the reset', async (t) => {
    const reply = await restsThrottledAccount(
      t,
      { attach },
      (s) => emulator(s, { rateLimitResetSeconds: 90 }),
      (s) => emulator(s),
      90_000,
    );
    assert.equal(reply, '429 {"code":"too_many_requests","message":"Too many requests"}');
  });

  test('throttled on the only account: the retry waits for the reset when it is longer than the ladder step', async (t) => {
    await retryWaitsForReset(
      t,
      { attach },
      (s) => emulator(s, { rateLimitResetSeconds: 300 }),
      300_000,
    );
  });

  test('5xx, a wrong key (401 unauthorized), a suspended account (403 permission_denied) and an unvalidated sender fail over to the next account', async (t) => {
    const s = scope(t);
    const down = await emulator(s);
    const wrongKey = await emulator(s, { apiKey: 'xkeysib-someone-else' });
    const suspended = await emulator(s);
    const otherSenders = await emulator(s, { validatedSenders: ['noreply@other.example'] });
    const good = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'brevo-failover', 'pro', { provider: false });
    const a = await attach(p, pk, down, { priority: '1' });
    const b = await attach(p, pk, wrongKey, { priority: '2' });
    const c = await attach(p, pk, suspended, { priority: '3' });
    const e = await attach(p, pk, otherSenders, { priority: '4' });
    const d = await attach(p, pk, good, { priority: '5' });
    down.behave('server_error', 1);
    suspended.behave('suspended', 1);
    const id = await sendOver(p, pk);
    const shown = await statusReached(p, id, 'sent');
    assert.deepEqual(await attemptOutcomes(p, id), [
      [a.id, 'temporary'],
      [b.id, 'account'],
      [c.id, 'account'],
      [e.id, 'account'],
      [d.id, 'sent'],
    ]);
    assert.deepEqual(
      shown.attempts_log.slice(0, 4).map((x) => x.reply),
      [
        '500 {"code":"internal_error","message":"Internal server error"}',
        '401 {"code":"unauthorized","message":"Key not found"}',
        '403 {"code":"permission_denied","message":"Your account is not activated. Please contact our support team."}',
        '400 {"code":"invalid_parameter","message":"Sending has been rejected because the sender you used sender@example.com is not valid. Validate your sender or authenticate your domain"}',
      ],
    );
  });

  test('a 400 invalid_parameter ends the message failed without another account', async (t) => {
    const lastError = await failsWithoutFailover(t, { start: (s) => emulator(s), attach });
    assert.equal(
      lastError,
      '400 {"code":"invalid_parameter","message":"email is not valid in to"}',
    );
  });

  test('an attachment type Brevo refuses is refused for this message (permanent)', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'brevo-ext', 'pro', { provider: false });
    await attach(p, pk, emu);
    const id = await sendOver(p, pk, {
      attachments: [
        {
          filename: 'setup.exe',
          content: 'TVqQAAMAAAAEAAAA',
          content_type: 'application/octet-stream',
        },
      ],
    });
    const shown = await statusReached(p, id, 'failed');
    assert.equal(
      shown.last_error,
      '400 {"code":"invalid_parameter","message":"Unsupported file extension exe for setup.exe"}',
    );
  });
});

describe('Brevo webhooks at /v1/feedback/<account>', () => {
  async function sent(s: Scope) {
    const emu = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'brevo-feedback', 'pro', { provider: false });
    const account = await attach(p, pk, emu);
    const id = await sendOver(p, pk, {
      to: ['ann@example.org', 'bob@example.org'],
      cc: ['cc@example.org', 'dan@example.net'],
      bcc: 'eve@example.net',
    });
    const providerId = (await statusReached(p, id, 'sent')).provider_message_id!;
    const vars = (recipient: string) => ({
      recipient,
      provider_message_id: providerId,
      postern_message_id: id,
    });
    return { p, pk, account, id, providerId, vars };
  }

  test('delivered, hard_bounce, soft_bounce, spam and blocked samples become exactly the normalized events and suppressions (bearer, basic auth and token URL alike)', async (t) => {
    const s = scope(t);
    const { p, pk, account, id, providerId, vars } = await sent(s);
    const viaBearer = (body: string) =>
      postFeedback(p.production, account.id, body, { authorization: `Bearer ${WEBHOOK_SECRET}` });
    const viaBasic = (body: string) =>
      postFeedback(p.production, account.id, body, {
        authorization: `Basic ${Buffer.from(`brevo:${WEBHOOK_SECRET}`).toString('base64')}`,
      });
    const viaToken = (body: string) =>
      postFeedback(p.production, account.id, body, {}, WEBHOOK_SECRET);
    const applied = { received: 1, applied: 1, duplicates: 0, unknown: 0 };

    const res = await viaBearer(webhook('webhook-delivered', vars('ann@example.org')));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, applied);
    assert.deepEqual((await eventData(p, id, 'mail.delivered')).delivery, {
      recipient: 'ann@example.org',
      provider: 'provider-f-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:05.000Z',
      reply: 'delivered',
    });
    assert.deepEqual(
      (await viaBasic(webhook('webhook-hard-bounce', vars('bob@example.org')))).body,
      applied,
    );
    assert.deepEqual((await eventData(p, id, 'mail.bounced')).bounce, {
      recipient: 'bob@example.org',
      provider: 'provider-f-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:06.000Z',
      type: 'hard',
      subtype: 'hard_bounce',
      reply: '550 5.1.1 The email account that you tried to reach does not exist',
    });
    assert.deepEqual(
      (await viaToken(webhook('webhook-soft-bounce', vars('eve@example.net')))).body,
      applied,
    );
    assert.deepEqual(
      (await viaToken(webhook('webhook-spam', vars('cc@example.org')))).body,
      applied,
    );
    assert.equal((await eventData(p, id, 'mail.complained')).complaint.feedback_type, 'spam');
    assert.deepEqual(
      (await viaBearer(webhook('webhook-blocked', vars('dan@example.net')))).body,
      applied,
    );
    assert.deepEqual(
      (await eventData(p, id, 'mail.failed')).failure.message,
      'blocked : due to blacklist user',
    );

    assert.deepEqual(await eventTypes(p, id), [
      'mail.accepted',
      'mail.sent',
      'mail.delivered',
      'mail.bounced',
      'mail.complained',
      'mail.failed',
    ]);
    assert.deepEqual(
      (await messageShow(p.ctx, id)).recipient_outcomes.map((o) => [o.email, o.status, o.reply]),
      [
        ['ann@example.org', 'delivered', 'delivered'],
        [
          'bob@example.org',
          'bounced',
          '550 5.1.1 The email account that you tried to reach does not exist',
        ],
        ['cc@example.org', 'complained', 'spam'],
        ['dan@example.net', 'failed', 'blocked : due to blacklist user'],
        ['eve@example.net', 'soft_bounced', '452 4.2.2 Mailbox full'],
      ],
    );
    assert.deepEqual((await suppressions(p, pk)).sort(), [
      ['bob@example.org', 'hard_bounce'],
      ['cc@example.org', 'complaint'],
    ]);
  });

  test('a batched POST (an array) applies each event; opens are acknowledged with a note; deferred is recorded only', async (t) => {
    const s = scope(t);
    const { p, account, id, vars } = await sent(s);
    const batch = `[${webhook('webhook-deferred', vars('eve@example.net'))},${webhook('webhook-unique-opened', vars('ann@example.org'))},${webhook('webhook-delivered', vars('ann@example.org'))}]`;
    const res = await postFeedback(p.production, account.id, batch, {}, WEBHOOK_SECRET);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      received: 2,
      applied: 2,
      duplicates: 0,
      unknown: 0,
      note: 'brevo "unique_opened" events are not delivery feedback',
    });
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent', 'mail.delivered']);
    assert.deepEqual(
      (await messageShow(p.ctx, id)).recipient_outcomes.map((o) => [o.email, o.status]),
      [
        ['ann@example.org', 'delivered'],
        ['eve@example.net', 'soft_bounced'],
      ],
    );
  });

  test('the same event twice applies once; an unknown message-id is acknowledged; X-Mailin-custom matches when the message-id does not', async (t) => {
    const s = scope(t);
    const { p, account, id, vars } = await sent(s);
    const deliver = (body: string) =>
      postFeedback(p.production, account.id, body, {}, WEBHOOK_SECRET);
    const hard = webhook('webhook-hard-bounce', vars('bob@example.org'));
    assert.deepEqual((await deliver(hard)).body, {
      received: 1,
      applied: 1,
      duplicates: 0,
      unknown: 0,
    });
    assert.deepEqual((await deliver(hard)).body, {
      received: 1,
      applied: 0,
      duplicates: 1,
      unknown: 0,
    });
    assert.equal((await eventTypes(p, id)).filter((e) => e === 'mail.bounced').length, 1);
    const unknown = await deliver(
      webhook('webhook-delivered', {
        recipient: 'x@example.org',
        provider_message_id: '<000000000000.00000000000@smtp-relay.mailin.fr>',
        postern_message_id: 'm.unknown',
      }),
    );
    assert.equal(unknown.status, 200);
    assert.deepEqual(unknown.body, { received: 1, applied: 0, duplicates: 0, unknown: 1 });
    // Brevo quotes ids with angle brackets; one without them is the same id.
    const bare = vars('ann@example.org');
    const byBareId = await deliver(
      webhook('webhook-delivered', {
        ...bare,
        provider_message_id: bare.provider_message_id.replace(/^<|>$/g, ''),
        postern_message_id: 'm.other',
      }),
    );
    assert.deepEqual(byBareId.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    const byCustomHeader = await deliver(
      webhook('webhook-delivered', {
        recipient: 'cc@example.org',
        provider_message_id: '<rewritten@smtp-relay.mailin.fr>',
        postern_message_id: id,
      }),
    );
    assert.deepEqual(byCustomHeader.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
  });

  test('no credentials, a wrong bearer token, a wrong password or token, and an account without a webhook secret are refused and change nothing', async (t) => {
    const s = scope(t);
    const { p, pk, account, id, vars } = await sent(s);
    const body = webhook('webhook-hard-bounce', vars('bob@example.org'));
    const noSecret = await attachProvider(p.ctx, pk.project.id, {
      slug: 'provider-f-api',
      apiKey: API_KEY,
      endpoint: 'http://127.0.0.1:9',
    });
    const refusals = [
      await postFeedback(p.production, account.id, body),
      await postFeedback(p.production, account.id, body, { authorization: 'Bearer guess' }),
      await postFeedback(p.production, account.id, body, {
        authorization: `Basic ${Buffer.from('brevo:guess').toString('base64')}`,
      }),
      await postFeedback(p.production, account.id, body, {}, 'guess'),
      await postFeedback(p.production, noSecret.id, body, {}, WEBHOOK_SECRET),
    ];
    assert.deepEqual(
      refusals.map((r) => [r.status, r.body?.error?.code, r.body?.error?.message]),
      [
        [
          401,
          'feedback:unauthenticated',
          'no credentials (expected the webhook secret by token, basic, bearer)',
        ],
        [
          401,
          'feedback:unauthenticated',
          'the bearer credential does not match the webhook secret',
        ],
        [401, 'feedback:unauthenticated', 'the basic credential does not match the webhook secret'],
        [401, 'feedback:unauthenticated', 'the token credential does not match the webhook secret'],
        [
          401,
          'feedback:unauthenticated',
          'the account has no webhook_secret to check notifications against',
        ],
      ],
    );
    const malformed = await postFeedback(
      p.production,
      account.id,
      '{"email":"bob@example.org"}',
      {},
      WEBHOOK_SECRET,
    );
    assert.deepEqual([malformed.status, malformed.body.error.code], [400, 'feedback:malformed']);
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent']);
    assert.deepEqual((await messageShow(p.ctx, id)).recipient_outcomes, []);
    assert.deepEqual(await suppressions(p, pk), []);
  });
});
