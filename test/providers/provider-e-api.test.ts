/**
 * provider-e-api (Postmark `POST /email`) against a Postmark emulator on 127.0.0.1: messages come
 * in over real HTTP into an in-process Postern with delivery on, the adapter maps the stored
 * MIME to Postmark's JSON and posts it to the emulator, and Postmark's webhooks come back over
 * real HTTP to `/v1/feedback/<account>[/<secret>]`, authenticated by the secret in the URL.
 */

import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { ManualClock } from '../../src/clock.js';
import { messageShow, releaseMessage } from '../../src/operator/messages.js';
import { suppress } from '../../src/operator/suppressions.js';
import { assertAccepted } from '../support/assertions.js';
import {
  attacherFor,
  attemptOutcomes,
  deliveringPostern,
  eventData,
  eventTypes,
  failsWithoutFailover,
  filledFixture,
  providerFixture,
  sendOver,
  startedFor,
  statusReached,
  suppressions,
  T0,
} from '../support/emulators/harness.js';
import {
  type PostmarkEmulatorOptions,
  startPostmarkEmulator,
} from '../support/emulators/postmark.js';
import { createProjectWithKeys, get, post, validMessage } from '../support/postern.js';
import { sqliteOnly } from '../support/postgres.js';
import { schedulerProbe } from '../support/probes.js';
import { type ProviderEmulator, postFeedback } from '../support/providerEmulator.js';
import { HANG_GUARD_MS, scope, settle, waitFor } from '../support/waiting.js';

const SERVER_TOKEN = 'c6a3c0e2-6c34-4b34-9e80-4b4f3b1e4a61';
const WEBHOOK_SECRET = 'pm-webhook-9d7e1c0b55a2';

type Scope = ReturnType<typeof scope>;

async function emulator(
  s: Scope,
  opts: Partial<PostmarkEmulatorOptions> = {},
): Promise<ProviderEmulator> {
  return startedFor(s, startPostmarkEmulator({ serverToken: SERVER_TOKEN, ...opts }));
}

const attach = attacherFor('provider-e-api', {
  apiKey: SERVER_TOKEN,
  webhookSecret: WEBHOOK_SECRET,
});

const basic = (user: string, pass: string) => ({
  authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`,
});

/** A documented webhook sample with its placeholders filled. */
const webhook = (name: string, vars: Record<string, string>): string =>
  filledFixture('e', name, vars);

const TEST_CONTENT = 'dGVzdCBjb250ZW50';

describe('provider-e-api sends through Postmark /email', () => {
  test('the request is the documented single-email call: server token, From/To/Cc/Bcc, Tag, bodies, ReplyTo, Metadata, Headers, Attachments with an inline ContentID, MessageStream', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'postmark', 'pro', { provider: false });
    const account = await attach(p, pk, emu);

    const id = await sendOver(p, pk, {
      from: 'sender@example.com',
      to: 'receiver@example.com',
      cc: 'copied@example.com',
      bcc: 'blank-copied@example.com',
      subject: 'Test',
      category: 'Invitation',
      html: '<b>Hello</b> <img src="cid:image.jpg"/>',
      text: 'Hello',
      reply_to: 'reply@example.com',
      metadata: { color: 'blue', 'client-id': '12345' },
      headers: { 'X-Custom-Header': 'value' },
      attachments: [
        { filename: 'readme.txt', content: TEST_CONTENT, content_type: 'text/plain' },
        { filename: 'report.pdf', content: TEST_CONTENT, content_type: 'application/octet-stream' },
        {
          filename: 'image.jpg',
          content: TEST_CONTENT,
          content_type: 'image/jpeg',
          content_id: 'image.jpg',
          disposition: 'inline',
        },
      ],
    });
    const shown = await statusReached(p, id, 'sent');

    assert.equal(emu.requests.length, 1);
    const req = emu.requests[0];
    const golden = JSON.parse(providerFixture('e', 'email.request.json'));
    assert.equal(req.method, golden.method);
    assert.equal(req.url, golden.path);
    for (const [name, value] of Object.entries(golden.headers as Record<string, string>))
      assert.equal(req.headers[name], value, `header ${name}`);
    assert.deepEqual(
      JSON.parse(req.body.toString('utf8')),
      JSON.parse(JSON.stringify(golden.body).replace('{{message_id}}', id)),
    );

    const answer = JSON.parse(shown.attempts_log[0].reply!.replace(/^200 /, ''));
    assert.deepEqual(Object.keys(answer), [
      'To',
      'SubmittedAt',
      'MessageID',
      'ErrorCode',
      'Message',
    ]);
    assert.match(
      answer.MessageID,
      /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
    );
    assert.equal(shown.provider, 'provider-e-api');
    assert.equal(shown.provider_message_id, answer.MessageID);
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.provider_account_id, a.outcome, a.provider_message_id]),
      [[account.id, 'sent', answer.MessageID]],
    );
    assert.equal((await eventData(p, id, 'mail.sent')).provider_message_id, answer.MessageID);
  });

  test('names, several tags, long metadata and a message stream from provider_options: what Postmark can carry is carried, in its limits', async (t) => {
    const s = scope(t);
    const emu = await emulator(s, { streams: ['outbound', 'receipts'] });
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'postmark-map', 'pro', { provider: false });
    await attach(p, pk, emu);
    const id = await sendOver(p, pk, {
      from: 'Shop, Inc. <shop@example.com>',
      to: ['Ann Smith <ann@example.org>', 'bob@example.org'],
      subject: 'Ünïcode',
      text: 'Only text',
      tags: ['first', 'second'],
      metadata: {
        short: 'kept',
        this_key_is_too_long_for_postmark: 'dropped',
        value: 'v'.repeat(81),
      },
      provider_options: { 'provider-e-api': { message_stream: 'receipts' } },
    });
    await statusReached(p, id, 'sent');
    const body = JSON.parse(emu.requests[0].body.toString('utf8'));
    assert.deepEqual(body, {
      From: '"Shop, Inc." <shop@example.com>',
      To: 'Ann Smith <ann@example.org>, bob@example.org',
      Subject: 'Ünïcode',
      // A single-part body ends with the line break the stored MIME gives it.
      TextBody: 'Only text\n',
      Tag: 'first',
      Metadata: { postern_message_id: id, short: 'kept' },
      MessageStream: 'receipts',
    });
  });

  test('a hand-off owing only Bcc recipients goes without To, as Postmark allows', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'postmark-bcc', 'pro', { provider: false });
    await attach(p, pk, emu);
    // The To recipient is suppressed after acceptance: at hand-off only the Bcc one is owed.
    const res = await post(p.production, '/v1/send', {
      key: pk.liveKey,
      json: validMessage({ to: 'gone@example.org', bcc: 'quiet@example.net', paused: true }),
    });
    assertAccepted(res, 'paused');
    const id = res.body.id as string;
    await suppress(p.ctx, pk.project.id, 'gone@example.org');
    await releaseMessage(p.ctx, id);
    await statusReached(p, id, 'sent');
    assert.equal(emu.requests.length, 1);
    const body = JSON.parse(emu.requests[0].body.toString('utf8'));
    assert.equal(body.To, undefined);
    assert.equal(body.Bcc, 'quiet@example.net');
  });
});

describe('provider-e-api errors drive the delivery engine', () => {
  test('429 (ErrorCode 429) and 500 fail over to the next account; the message is sent there', async (t) => {
    const s = scope(t);
    const limited = await emulator(s);
    const broken = await emulator(s);
    const good = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'postmark-failover', 'pro', { provider: false });
    const a = await attach(p, pk, limited, { priority: '1' });
    const b = await attach(p, pk, broken, { priority: '2' });
    const c = await attach(p, pk, good, { priority: '3' });
    limited.behave('throttle', 1);
    broken.behave('server_error', 1);
    const id = await sendOver(p, pk);
    const shown = await statusReached(p, id, 'sent');
    assert.deepEqual(await attemptOutcomes(p, id), [
      [a.id, 'temporary'],
      [b.id, 'temporary'],
      [c.id, 'sent'],
    ]);
    assert.match(
      shown.attempts_log[0].reply ?? '',
      /^429 \{"ErrorCode":429,"Message":"Rate limit exceeded/,
    );
  });

  test('throttled on the only account: back on the retry ladder, sent when due', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(T0);
    const emu = await emulator(s);
    const p = await deliveringPostern(s, clock);
    const looked = await schedulerProbe(s, p);
    const pk = await createProjectWithKeys(p.ctx, 'postmark-ladder', 'pro', { provider: false });
    await attach(p, pk, emu);
    emu.behave('throttle', 1);
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
    await statusReached(p, id, 'sent');
    assert.equal(emu.requests.length, 2);
  });

  test('a bad server token (401, ErrorCode 10), no credits (405), an unknown message stream (1235) are the account’s: the next account sends', async (t) => {
    const s = scope(t);
    const wrongToken = await emulator(s, { serverToken: 'another-server' });
    const broke = await emulator(s, { streams: ['outbound', 'receipts'] });
    const noStream = await emulator(s);
    const good = await emulator(s, { streams: ['outbound', 'receipts'] });
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'postmark-accounts', 'pro', { provider: false });
    const a = await attach(p, pk, wrongToken, { priority: '1' });
    const b = await attach(p, pk, broke, { priority: '2' });
    const c = await attach(p, pk, noStream, { priority: '3' });
    const d = await attach(p, pk, good, { priority: '4' });
    broke.behave('suspended', 1);
    const id = await sendOver(p, pk, {
      provider_options: { 'provider-e-api': { message_stream: 'receipts' } },
    });
    const shown = await statusReached(p, id, 'sent');
    assert.deepEqual(await attemptOutcomes(p, id), [
      [a.id, 'account'],
      [b.id, 'account'],
      [c.id, 'account'],
      [d.id, 'sent'],
    ]);
    assert.deepEqual(
      shown.attempts_log.slice(0, 3).map((x) => x.reply),
      [
        '401 {"ErrorCode":10,"Message":"Request does not contain a valid Server token. Please refer to https://postmarkapp.com/developer/api/overview#authentication"}',
        '422 {"ErrorCode":405,"Message":"Not allowed to send: your account has run out of credits."}',
        '422 {"ErrorCode":1235,"Message":"The \'MessageStream\' provided does not exist on this server."}',
      ],
    );
  });

  test('an invalid email request (ErrorCode 300) ends the message failed without another account', async (t) => {
    const lastError = await failsWithoutFailover(t, { start: (s) => emulator(s), attach });
    assert.match(lastError ?? '', /^422 \{"ErrorCode":300,"Message":"Error parsing 'To'/);
  });

  test('inactive recipients (ErrorCode 406) bounce and are suppressed; the others are still owed the message', async (t) => {
    const s = scope(t);
    const emu = await emulator(s, { inactive: ['dead@example.org', 'gone@example.org'] });
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'postmark-inactive', 'pro', { provider: false });
    await attach(p, pk, emu, { priority: '1' });
    const spare = await emulator(s);
    await attach(p, pk, spare, { priority: '2' });

    const mixed = await sendOver(p, pk, { to: ['dead@example.org', 'alive@example.org'] });
    const shown = await statusReached(p, mixed, 'sent');
    assert.deepEqual(
      shown.attempts_log.map((a) => a.outcome),
      ['temporary', 'sent'],
    );
    assert.deepEqual(
      shown.recipient_outcomes.map((o) => [o.email, o.status]),
      [['dead@example.org', 'bounced']],
    );
    assert.equal(JSON.parse(spare.requests[0].body.toString('utf8')).To, 'alive@example.org');
    assert.deepEqual(await suppressions(p, pk), [['dead@example.org', 'hard_bounce']]);

    // Every recipient inactive: they bounce, and nobody is left to send to.
    const onlyDead = await sendOver(p, pk, { to: 'Gone <GONE@example.org>' });
    const failed = await statusReached(p, onlyDead, 'failed');
    assert.deepEqual(
      failed.attempts_log.map((a) => a.outcome),
      ['permanent'],
    );
    assert.deepEqual(
      failed.recipient_outcomes.map((o) => [o.email, o.status]),
      [['GONE@example.org', 'bounced']],
    );
    assert.deepEqual(await eventTypes(p, onlyDead), [
      'mail.accepted',
      'mail.bounced',
      'mail.failed',
    ]);
    assert.equal(spare.requests.length, 1);
  });
});

describe('Postmark webhooks at /v1/feedback/<account>', () => {
  async function sent(s: Scope) {
    const emu = await emulator(s);
    const p = await deliveringPostern(s, new ManualClock(T0));
    const pk = await createProjectWithKeys(p.ctx, 'postmark-feedback', 'pro', { provider: false });
    const account = await attach(p, pk, emu);
    const id = await sendOver(p, pk, {
      to: ['ann@example.org', 'bob@example.org'],
      cc: 'cc@example.org',
      bcc: 'dan@example.net',
    });
    const providerId = (await statusReached(p, id, 'sent')).provider_message_id!;
    const vars = (recipient: string) => ({
      recipient,
      provider_message_id: providerId,
      postern_message_id: id,
    });
    return { p, pk, account, id, providerId, vars };
  }

  test('delivery, hard bounce, soft bounce, spam complaint and ISP block samples become exactly the normalized events and suppressions (basic auth and token URL alike)', async (t) => {
    const s = scope(t);
    const { p, pk, account, id, providerId, vars } = await sent(s);
    const viaBasic = (body: string) =>
      postFeedback(p.production, account.id, body, basic('postmark', WEBHOOK_SECRET));
    const viaToken = (body: string) =>
      postFeedback(p.production, account.id, body, {}, WEBHOOK_SECRET);

    let res = await viaBasic(webhook('webhook-delivery', vars('ann@example.org')));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual((await eventData(p, id, 'mail.delivered')).delivery, {
      recipient: 'ann@example.org',
      provider: 'provider-e-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:05.000Z',
      reply: 'smtp;250 2.0.0 OK  1614188092 y13si1277520qkj.194 - gsmtp',
    });

    // Soft then hard for the same address: 64-bit IDs that a JSON number would round to the
    // same value are kept apart (read as digits).
    res = await viaToken(webhook('webhook-bounce-soft', vars('bob@example.org')));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    res = await viaToken(webhook('webhook-bounce-hard', vars('bob@example.org')));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual((await eventData(p, id, 'mail.bounced')).bounce, {
      recipient: 'bob@example.org',
      provider: 'provider-e-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:06.000Z',
      type: 'hard',
      subtype: 'HardBounce',
      reply: 'smtp;550 5.1.1 The email account that you tried to reach does not exist.',
    });

    res = await viaBasic(webhook('webhook-spam-complaint', vars('cc@example.org')));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.equal(
      (await eventData(p, id, 'mail.complained')).complaint.feedback_type,
      'SpamComplaint',
    );

    res = await viaBasic(webhook('webhook-bounce-blocked', vars('dan@example.net')));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual((await eventData(p, id, 'mail.failed')).failure, {
      reason: 'provider_rejected',
      message: 'smtp;554 5.7.1 Message rejected due to content restrictions',
      recipient: 'dan@example.net',
      provider: 'provider-e-api',
      provider_message_id: providerId,
      occurred_at: '2026-03-02T10:00:08.000Z',
    });

    assert.deepEqual(await eventTypes(p, id), [
      'mail.accepted',
      'mail.sent',
      'mail.delivered',
      'mail.bounced',
      'mail.complained',
      'mail.failed',
    ]);
    assert.deepEqual(
      (await messageShow(p.ctx, id)).recipient_outcomes.map((o) => [o.email, o.status]),
      [
        ['ann@example.org', 'delivered'],
        ['bob@example.org', 'bounced'],
        ['cc@example.org', 'complained'],
        ['dan@example.net', 'failed'],
      ],
    );
    assert.deepEqual((await suppressions(p, pk)).sort(), [
      ['bob@example.org', 'hard_bounce'],
      ['cc@example.org', 'complaint'],
    ]);
  });

  test('a soft bounce is recorded only; opens and subscription changes are acknowledged without effect', async (t) => {
    const s = scope(t);
    const { p, pk, account, id, vars } = await sent(s);
    const deliver = (body: string) =>
      postFeedback(p.production, account.id, body, {}, WEBHOOK_SECRET);
    assert.deepEqual(
      (await deliver(webhook('webhook-bounce-soft', vars('bob@example.org')))).body,
      { received: 1, applied: 1, duplicates: 0, unknown: 0 },
    );
    let res = await deliver(webhook('webhook-open', vars('ann@example.org')));
    assert.deepEqual(res.body, {
      received: 0,
      applied: 0,
      duplicates: 0,
      unknown: 0,
      note: 'postmark "Open" records are not delivery feedback',
    });
    res = await deliver(webhook('webhook-subscription-change', vars('ann@example.org')));
    assert.deepEqual(res.body, {
      received: 0,
      applied: 0,
      duplicates: 0,
      unknown: 0,
      note: 'postmark "SubscriptionChange" records are not delivery feedback',
    });
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent']);
    assert.deepEqual(
      (await messageShow(p.ctx, id)).recipient_outcomes.map((o) => [o.email, o.status, o.reply]),
      [
        [
          'bob@example.org',
          'soft_bounced',
          'smtp;452 4.2.2 The email account that you tried to reach is over quota.',
        ],
      ],
    );
    assert.deepEqual(await suppressions(p, pk), []);
    assert.equal((await messageShow(p.ctx, id)).status, 'sent');
  });

  test('the same record twice applies once; an unknown MessageID is acknowledged; our metadata matches when the MessageID does not', async (t) => {
    const s = scope(t);
    const { p, account, id, vars } = await sent(s);
    const deliver = (body: string) =>
      postFeedback(p.production, account.id, body, {}, WEBHOOK_SECRET);
    const hard = webhook('webhook-bounce-hard', vars('bob@example.org'));
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
    const delivery = webhook('webhook-delivery', vars('ann@example.org'));
    assert.deepEqual((await deliver(delivery)).body, {
      received: 1,
      applied: 1,
      duplicates: 0,
      unknown: 0,
    });
    assert.deepEqual((await deliver(delivery)).body, {
      received: 1,
      applied: 0,
      duplicates: 1,
      unknown: 0,
    });
    assert.deepEqual(await eventTypes(p, id), [
      'mail.accepted',
      'mail.sent',
      'mail.bounced',
      'mail.delivered',
    ]);

    const unknown = await deliver(
      webhook('webhook-delivery', {
        recipient: 'x@example.org',
        provider_message_id: '00000000-0000-0000-0000-000000000000',
        postern_message_id: 'm.unknown',
      }),
    );
    assert.equal(unknown.status, 200);
    assert.deepEqual(unknown.body, { received: 1, applied: 0, duplicates: 0, unknown: 1 });
    const byMetadata = await deliver(
      webhook('webhook-delivery', {
        recipient: 'cc@example.org',
        provider_message_id: '11111111-2222-3333-4444-555555555555',
        postern_message_id: id,
      }),
    );
    assert.deepEqual(byMetadata.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
  });

  test('no credentials, a wrong basic-auth password, a wrong token, and a right token beside a wrong password are refused and change nothing', async (t) => {
    const s = scope(t);
    const { p, pk, account, id, vars } = await sent(s);
    const body = webhook('webhook-bounce-hard', vars('bob@example.org'));
    const refusals = [
      await postFeedback(p.production, account.id, body),
      await postFeedback(p.production, account.id, body, basic('postmark', 'guess')),
      await postFeedback(p.production, account.id, body, {}, 'guess'),
      await postFeedback(
        p.production,
        account.id,
        body,
        basic('postmark', 'guess'),
        WEBHOOK_SECRET,
      ),
      // Postmark does not send bearer tokens: not a way in.
      await postFeedback(p.production, account.id, body, {
        authorization: `Bearer ${WEBHOOK_SECRET}`,
      }),
    ];
    assert.deepEqual(
      refusals.map((r) => [r.status, r.body.error.code, r.body.error.message]),
      [
        [
          401,
          'feedback:unauthenticated',
          'no credentials (expected the webhook secret by token, basic)',
        ],
        [401, 'feedback:unauthenticated', 'the basic credential does not match the webhook secret'],
        [401, 'feedback:unauthenticated', 'the token credential does not match the webhook secret'],
        [401, 'feedback:unauthenticated', 'the basic credential does not match the webhook secret'],
        [
          401,
          'feedback:unauthenticated',
          'no credentials (expected the webhook secret by token, basic)',
        ],
      ],
    );
    const malformed = await postFeedback(
      p.production,
      account.id,
      '{"Type":"HardBounce"}',
      {},
      WEBHOOK_SECRET,
    );
    assert.deepEqual([malformed.status, malformed.body.error.code], [400, 'feedback:malformed']);
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent']);
    assert.deepEqual((await messageShow(p.ctx, id)).recipient_outcomes, []);
    assert.deepEqual(await suppressions(p, pk), []);
  });

  // About SQLite's one write lock (PostgreSQL has none the whole database waits on).
  test('a notification waiting for the index write lock holds up neither door: the health check answers meanwhile, and the notification applies once the lock is free', {
    skip: sqliteOnly(),
  }, async (t) => {
    const s = scope(t);
    const { p, account, id, vars } = await sent(s);
    // Another process (an operator's command, say) holds the index's write lock.
    const other = new Database(path.join(p.stateDir, 'postern.db'));
    t.after(() => other.close());
    other.exec('BEGIN IMMEDIATE');
    let answered = false;
    const notification = postFeedback(
      p.production,
      account.id,
      webhook('webhook-delivery', vars('ann@example.org')),
      {},
      WEBHOOK_SECRET,
    ).finally(() => (answered = true));
    await settle(300);
    const health = await get(p.production, '/healthz');
    assert.equal(health.status, 200);
    assert.equal(answered, false, 'the notification waits for the lock');
    other.exec('COMMIT');
    const res = await notification;
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.equal((await eventTypes(p, id)).at(-1), 'mail.delivered');
  });
});
