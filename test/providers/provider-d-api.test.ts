/**
 * provider-d-api (Resend) end to end: messages come in over real HTTP into an in-process
 * Postern with delivery on, go out over real HTTP to the Resend emulator
 * (test/support/emulators/resend.ts), and Resend's webhooks (Standard Webhooks / Svix
 * signatures) come back over real HTTP to the feedback endpoint.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { messageShow, releaseMessage } from '../../src/operator/messages.js';
import { type AttachOptions, attachProvider } from '../../src/operator/providers.js';
import { suppress } from '../../src/operator/suppressions.js';
import { idempotencyKey } from '../../src/providers/resend/adapter.js';
import { svixSignature } from '../../src/providers/resend/feedback.js';
import { eventsForMessage } from '../../src/store/events.js';
import {
  type ApiKit,
  assertRefused,
  attacherFor,
  deliveringPostern,
  eventTypes,
  failsOverToSecond,
  failsWithoutFailover,
  feedbackState,
  providerFixture,
  requestJson as requestBody,
  retryWaitsForReset,
  sendOver,
  startedFor,
  statusReached,
  T0,
} from '../support/emulators/harness.js';
import {
  RESEND_TEST_KEY,
  type ResendEmulatorState,
  resendIdFor,
  startResendEmulator,
} from '../support/emulators/resend.js';
import { createProjectWithKeys } from '../support/postern.js';
import { postFeedback } from '../support/providerEmulator.js';
import { gate, HANG_GUARD_MS, scope, waitFor } from '../support/waiting.js';

const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
const fixture = (name: string) => providerFixture('d', name);
type Resend = Awaited<ReturnType<typeof startResendEmulator>>;

async function resend(
  s: ReturnType<typeof scope>,
  state: Partial<Omit<ResendEmulatorState, 'sent'>> = {},
): Promise<Resend> {
  return startedFor(s, startResendEmulator(state));
}

const attachResend = attacherFor('provider-d-api', { apiKey: RESEND_TEST_KEY });

describe('provider-d-api: the /emails request', () => {
  test('a full message becomes exactly the documented /emails body, with an Idempotency-Key; 200 {"id"} is the provider id', async (t) => {
    const s = scope(t);
    const emu = await resend(s);
    const p = await deliveringPostern(s);
    const pk = await createProjectWithKeys(p.ctx, 'd golden', 'pro', { provider: false });
    const account = await attachResend(p, pk, emu);
    const golden = JSON.parse(fixture('emails.json'));

    const id = await sendOver(p, pk, {
      from: 'Acme <onboarding@resend.dev>',
      to: ['Delivered <delivered@resend.dev>', 'bounced@resend.dev'],
      cc: 'Carbon Copy <cc@resend.dev>',
      bcc: 'bcc@resend.dev',
      reply_to: ['Support <support@resend.dev>', 'help@resend.dev'],
      subject: 'hello world',
      html: '<p>it works!</p><p><img src="cid:logo-image"></p>',
      text: 'it works!',
      headers: { 'X-Entity-Ref-ID': '123456789' },
      attachments: [
        {
          filename: 'invoice.pdf',
          content_type: 'application/pdf',
          content: golden.attachments[1].content,
        },
        { filename: 'logo.png', content_type: 'image/png', content_id: 'logo-image', content: PNG },
      ],
      category: 'confirm_email',
      tags: ['welcome'],
      metadata: { user_id: '1234567890', 'plan tier': 'gold.plus' },
    });
    const shown = await statusReached(p, id, 'sent');

    assert.equal(emu.requests.length, 1);
    const req = emu.requests[0];
    assert.equal(req.method, 'POST');
    assert.equal(req.url, '/emails');
    assert.equal(req.headers.authorization, `Bearer ${RESEND_TEST_KEY}`);
    assert.equal(req.headers['content-type'], 'application/json');
    const expected = JSON.parse(
      fixture('emails.json').replaceAll('{{MESSAGE_ID_TAG}}', id.replace('.', '_')),
    );
    assert.equal(JSON.stringify(JSON.parse(req.body.toString('utf8'))), JSON.stringify(expected));
    const everyone = [
      'delivered@resend.dev',
      'bounced@resend.dev',
      'cc@resend.dev',
      'bcc@resend.dev',
    ].map((email) => ({ email, name: null }));
    assert.equal(
      req.headers['idempotency-key'],
      idempotencyKey(id, { to: everyone, cc: [], bcc: [] }),
    );
    assert.match(
      String(req.headers['idempotency-key']),
      /^postern\/m\.[0-9a-z]{26}\/[0-9a-f]{16}$/,
    );

    assert.equal(shown.provider, 'provider-d-api');
    assert.equal(shown.provider_message_id, resendIdFor(1));
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.provider_account_id, a.outcome, a.reply]),
      [[account.id, 'sent', `200 id ${resendIdFor(1)}`]],
    );
    assert.equal(
      JSON.parse(
        (await eventsForMessage(p.ctx.store, id)).find((e) => e.type === 'mail.sent')!.data,
      ).provider_message_id,
      resendIdFor(1),
    );
  });

  test('only Bcc recipients owed (the To is suppressed): one request each, addressed to that recipient alone', async (t) => {
    const s = scope(t);
    const emu = await resend(s);
    const p = await deliveringPostern(s);
    const pk = await createProjectWithKeys(p.ctx, 'd bcc', 'pro', { provider: false });
    await attachResend(p, pk, emu);
    const id = await sendOver(
      p,
      pk,
      { to: 'gone@example.org', bcc: ['b1@example.net', 'b2@example.net'], paused: true },
      'paused',
    );
    await suppress(p.ctx, pk.project.id, 'gone@example.org');
    await releaseMessage(p.ctx, id);
    const shown = await statusReached(p, id, 'sent');
    assert.deepEqual(
      emu.requests.map((_, i) => [
        requestBody(emu, i).to,
        requestBody(emu, i).cc,
        requestBody(emu, i).bcc,
      ]),
      [
        [['b1@example.net'], undefined, undefined],
        [['b2@example.net'], undefined, undefined],
      ],
    );
    assert.notEqual(
      emu.requests[0].headers['idempotency-key'],
      emu.requests[1].headers['idempotency-key'],
    );
    assert.equal(shown.provider_message_id, resendIdFor(1));
  });

  test('a hand-off cut off after Resend took it is repeated with the same Idempotency-Key: Resend answers the first id, nothing is sent twice', async (t) => {
    const s = scope(t);
    const emu = await resend(s);
    const clock = new ManualClock(T0);
    // A timeout a request to a local emulator meets many times over on a loaded machine.
    const p = await deliveringPostern(s, clock, {
      api_timeout_ms: 3000,
      retry_ladder_seconds: [10],
    });
    const pk = await createProjectWithKeys(p.ctx, 'd idempotent', 'pro', { provider: false });
    await attachResend(p, pk, emu);
    // Resend takes the first request but holds its answer until the hand-off has timed out.
    const held = gate();
    emu.holdUntil = held.opened;
    const id = await sendOver(p, pk);
    await waitFor(
      async () =>
        (await messageShow(p.ctx, id)).attempts_log.length === 1 &&
        (await messageShow(p.ctx, id)).status === 'queued',
      HANG_GUARD_MS,
      'the timed-out attempt',
    );
    assert.match(
      (await messageShow(p.ctx, id)).attempts_log[0].reply ?? '',
      /timed out after 3000 ms/,
    );
    assert.equal(emu.resend.sent.size, 1, 'Resend took the first request');

    emu.holdUntil = null;
    held.open();
    clock.advance(10_000);
    const shown = await statusReached(p, id, 'sent');
    assert.equal(emu.requests.length, 2);
    assert.equal(
      emu.requests[1].headers['idempotency-key'],
      emu.requests[0].headers['idempotency-key'],
    );
    assert.ok(emu.requests[1].body.equals(emu.requests[0].body));
    assert.equal(emu.resend.sent.size, 1, 'still one email at Resend');
    assert.equal(shown.provider_message_id, resendIdFor(1));
  });
});

const kit: ApiKit<Resend> = {
  start: (s) => resend(s),
  attach: attachResend,
  firstId: resendIdFor(1),
};

describe('provider-d-api: Resend answers drive the delivery engine', () => {
  const cases: [string, (first: Resend) => Partial<AttachOptions> | void, string][] = [
    ['429 rate_limit_exceeded', (first) => void first.behave('throttle'), 'temporary'],
    ['500 application_error', (first) => void first.behave('server_error'), 'temporary'],
    [
      '409 concurrent_idempotent_requests',
      (first) => {
        first.resend.keyInProgress = true;
      },
      'temporary',
    ],
    ['403 suspended_api_key', (first) => void first.behave('suspended'), 'account'],
    ['403 invalid_api_key', () => ({ apiKey: 're_not_this_one' }), 'account'],
    [
      '403 validation_error: the sending domain is not verified',
      (first) => {
        first.resend.verifiedDomains = ['elsewhere.example'];
      },
      'account',
    ],
    [
      '429 daily_quota_exceeded',
      (first) => {
        first.resend.quotaExceeded = 'daily';
      },
      'account',
    ],
    [
      '404 not_found from a wrong --endpoint (the account, not the message)',
      (first) => ({ endpoint: `${first.url}/v1` }),
      'account',
    ],
  ];
  for (const [name, arrange, outcome] of cases) {
    test(`${name}: the next account sends it at once`, (t) =>
      failsOverToSecond(t, kit, arrange, outcome));
  }

  test('422 validation_error (the message refused) fails it: no other account is tried', async (t) => {
    const lastError = await failsWithoutFailover(t, kit);
    assert.match(lastError ?? '', /^422 validation_error: Invalid `to` field/);
  });

  test('429 retry-after is honoured: the retry waits for it, not for the ladder', async (t) => {
    const lastError = await retryWaitsForReset(
      t,
      kit,
      (s) => resend(s, { retryAfterSeconds: 90 }),
      90_000,
    );
    assert.match(lastError ?? '', /^provider-d-api: 429 rate_limit_exceeded: Too many requests/);
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Webhooks (Standard Webhooks / Svix)                                                          */
/* ------------------------------------------------------------------------------------------ */

const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`;
const nowSeconds = () => String(Math.floor(Date.now() / 1000));

/** Svix's headers for a body; `signatures` lets a test add entries (a rotated secret's). */
function svixHeaders(
  secret: string,
  body: string,
  svixId: string,
  timestamp = nowSeconds(),
  extra: string[] = [],
): Record<string, string> {
  return {
    'svix-id': svixId,
    'svix-timestamp': timestamp,
    'svix-signature': [...extra, svixSignature(secret, svixId, timestamp, Buffer.from(body))].join(
      ' ',
    ),
  };
}

/** A documented webhook payload for our message and one recipient. */
function documented(type: string, emailId: string, to: string, messageId: string): string {
  const events = JSON.parse(fixture('webhooks.json')).events as Record<string, unknown>;
  return JSON.stringify(events[type])
    .replaceAll('{{EMAIL_ID}}', emailId)
    .replaceAll('{{TO}}', to)
    .replaceAll('{{MESSAGE_ID_TAG}}', messageId.replace('.', '_'));
}

describe('provider-d feedback: Resend webhooks', () => {
  test('documented events become exactly the normalized events and suppressions; retries, replays, unknown ids, bad signatures and stale timestamps', async (t) => {
    const s = scope(t);
    const emu = await resend(s);
    const p = await deliveringPostern(s);
    const secret = newSecret();
    const pk = await createProjectWithKeys(p.ctx, 'd feedback', 'pro', { provider: false });
    const account = await attachResend(p, pk, emu, { webhookSecret: secret });
    const id = await sendOver(p, pk, {
      from: 'Acme <onboarding@resend.dev>',
      to: ['Delivered <delivered@resend.dev>', 'bounced@resend.dev'],
      cc: 'complained@resend.dev',
      bcc: ['delayed@resend.dev', 'failed@resend.dev', 'suppressed@resend.dev'],
    });
    const emailId = (await statusReached(p, id, 'sent')).provider_message_id!;
    const feedback = (body: string, headers: Record<string, string>) =>
      postFeedback(p.production, account.id, body, headers);
    const state = () => feedbackState(p, pk, id);

    const delivered = documented('email.delivered', emailId, 'delivered@resend.dev', id);
    await assertRefused(
      feedback,
      delivered,
      [
        [{}, 401, 'feedback:unauthenticated'],
        [svixHeaders(newSecret(), delivered, 'msg_refused1'), 401, 'feedback:unauthenticated'],
        [svixHeaders(secret, `${delivered} `, 'msg_refused2'), 401, 'feedback:unauthenticated'],
        [
          { ...svixHeaders(secret, delivered, 'msg_refused3'), 'svix-id': 'msg_other' },
          401,
          'feedback:unauthenticated',
        ],
        [
          svixHeaders(
            secret,
            delivered,
            'msg_refused4',
            String(Math.floor(Date.now() / 1000) - 400),
          ),
          401,
          'feedback:stale',
        ],
        [
          svixHeaders(
            secret,
            delivered,
            'msg_refused5',
            String(Math.floor(Date.now() / 1000) + 400),
          ),
          401,
          'feedback:stale',
        ],
      ],
      state,
    );

    const posts: [string, string, Record<string, number | string>][] = [
      [
        'email.sent',
        'delivered@resend.dev',
        {
          received: 0,
          applied: 0,
          duplicates: 0,
          unknown: 0,
          note: 'email.sent is not delivery feedback; ignored',
        },
      ],
      [
        'email.delivered',
        'delivered@resend.dev',
        { received: 1, applied: 1, duplicates: 0, unknown: 0 },
      ],
      [
        'email.bounced',
        'bounced@resend.dev',
        { received: 1, applied: 1, duplicates: 0, unknown: 0 },
      ],
      [
        'email.delivery_delayed',
        'delayed@resend.dev',
        { received: 1, applied: 1, duplicates: 0, unknown: 0 },
      ],
      [
        'email.bounced.transient',
        'delayed@resend.dev',
        { received: 1, applied: 1, duplicates: 0, unknown: 0 },
      ],
      [
        'email.complained',
        'complained@resend.dev',
        { received: 1, applied: 1, duplicates: 0, unknown: 0 },
      ],
      ['email.failed', 'failed@resend.dev', { received: 1, applied: 1, duplicates: 0, unknown: 0 }],
      [
        'email.suppressed',
        'suppressed@resend.dev',
        { received: 1, applied: 1, duplicates: 0, unknown: 0 },
      ],
      [
        'email.opened',
        'delivered@resend.dev',
        {
          received: 0,
          applied: 0,
          duplicates: 0,
          unknown: 0,
          note: 'email.opened is not delivery feedback; ignored',
        },
      ],
      [
        'email.clicked',
        'delivered@resend.dev',
        {
          received: 0,
          applied: 0,
          duplicates: 0,
          unknown: 0,
          note: 'email.clicked is not delivery feedback; ignored',
        },
      ],
    ];
    const sentHeaders: Record<string, string>[] = [];
    for (const [i, [type, to, tally]] of posts.entries()) {
      const body = documented(type, emailId, to, id);
      // A rotated secret's signature first: any matching v1 entry authenticates.
      const headers = svixHeaders(secret, body, `msg_2SYaCH2ca1kLf0KTwUyj${i}`, nowSeconds(), [
        'v1,bm90IHRoaXMgb25lIGVpdGhlcg==',
      ]);
      sentHeaders.push(headers);
      const res = await feedback(body, headers);
      assert.equal(res.status, 200, `${type}: ${res.text}`);
      assert.deepEqual(res.body, tally, type);
    }
    const after = await state();
    assert.deepEqual(after.events, [
      'mail.accepted',
      'mail.sent',
      'mail.delivered',
      'mail.bounced',
      'mail.complained',
      'mail.failed',
      'mail.failed',
    ]);
    assert.deepEqual(after.suppressions, [
      ['bounced@resend.dev', 'hard_bounce'],
      ['complained@resend.dev', 'complaint'],
    ]);
    assert.deepEqual(after.outcomes, [
      {
        email: 'bounced@resend.dev',
        status: 'bounced',
        reply:
          "The recipient's email address is on the suppression list because it has a recent history of producing hard bounces.",
      },
      { email: 'complained@resend.dev', status: 'complained', reply: 'complained' },
      {
        email: 'delayed@resend.dev',
        status: 'soft_bounced',
        reply: 'smtp; 452 4.2.2 The email account that you tried to reach is over quota.',
      },
      { email: 'delivered@resend.dev', status: 'delivered', reply: 'delivered' },
      { email: 'failed@resend.dev', status: 'failed', reply: 'reached_daily_quota' },
      {
        email: 'suppressed@resend.dev',
        status: 'failed',
        reply:
          'Resend has suppressed sending to this address because it is on the account-level suppression list. This does not count toward your bounce rate metric',
      },
    ]);
    assert.equal(after.status, 'complained');
    const bounce = (await eventsForMessage(p.ctx.store, id))
      .map((e) => JSON.parse(e.data))
      .find((d) => d.bounce)!.bounce;
    assert.deepEqual(bounce, {
      recipient: 'bounced@resend.dev',
      provider: 'provider-d-api',
      provider_message_id: emailId,
      occurred_at: '2026-02-22T23:41:12.126Z',
      type: 'hard',
      subtype: 'Suppressed',
      reply:
        "The recipient's email address is on the suppression list because it has a recent history of producing hard bounces.",
    });

    // The exact same signed request again: a replay, refused.
    const bouncedBody = documented('email.bounced', emailId, 'bounced@resend.dev', id);
    const replay = await feedback(bouncedBody, sentHeaders[2]);
    assert.equal(replay.status, 406, replay.text);
    assert.equal(replay.body.error.code, 'feedback:replayed');

    // Svix retrying the delivery (same svix-id, signed at a later timestamp): acknowledged once.
    const retry = await feedback(
      bouncedBody,
      svixHeaders(
        secret,
        bouncedBody,
        sentHeaders[2]['svix-id'],
        String(Number(sentHeaders[2]['svix-timestamp']) + 1),
      ),
    );
    assert.equal(retry.status, 200, retry.text);
    assert.deepEqual(retry.body, { received: 1, applied: 0, duplicates: 1, unknown: 0 });
    assert.deepEqual(await state(), after);

    // An email Postern never handed off (and no tag of ours): logged and acknowledged.
    const unknown = documented(
      'email.delivered',
      '56761188-7520-42d8-8898-ff6fc54ce618',
      'someone@resend.dev',
      'm.00000000000000000000000000',
    );
    const unknownRes = await feedback(unknown, svixHeaders(secret, unknown, 'msg_unknown'));
    assert.equal(unknownRes.status, 200);
    assert.deepEqual(unknownRes.body, { received: 1, applied: 0, duplicates: 0, unknown: 1 });
    assert.deepEqual(await state(), after);

    // Authenticated but not a Resend event.
    const malformed = await feedback('[1,2]', svixHeaders(secret, '[1,2]', 'msg_malformed'));
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.error.code, 'feedback:malformed');
  });

  test('matched by our postern_message_id tag when data.email_id is not the one stored', async (t) => {
    const s = scope(t);
    const emu = await resend(s);
    const p = await deliveringPostern(s);
    const secret = newSecret();
    const pk = await createProjectWithKeys(p.ctx, 'd tag', 'pro', { provider: false });
    const account = await attachResend(p, pk, emu, { webhookSecret: secret });
    const id = await sendOver(p, pk, { to: 'delivered@resend.dev' });
    await statusReached(p, id, 'sent');
    const body = documented(
      'email.delivered',
      '00000000-0000-4000-a000-000000000000',
      'delivered@resend.dev',
      id,
    );
    const res = await postFeedback(
      p.production,
      account.id,
      body,
      svixHeaders(secret, body, 'msg_bytag'),
    );
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent', 'mail.delivered']);
  });

  test('the documented Svix example (secret, id, timestamp, signature) verifies: refused only as stale; a changed byte is unauthenticated', async (t) => {
    const s = scope(t);
    const p = await deliveringPostern(s);
    const v = JSON.parse(fixture('svix-vector.json')) as Record<string, string>;
    const pk = await createProjectWithKeys(p.ctx, 'd vector', 'pro', { provider: false });
    const account = await attachProvider(p.ctx, pk.project.id, {
      slug: 'provider-d-api',
      apiKey: RESEND_TEST_KEY,
      webhookSecret: v.secret,
    });
    const headers = {
      'svix-id': v['svix-id'],
      'svix-timestamp': v['svix-timestamp'],
      'svix-signature': v['svix-signature'],
    };
    const good = await postFeedback(p.production, account.id, v.payload, headers);
    assert.equal(good.status, 401);
    assert.equal(good.body.error.code, 'feedback:stale');
    const bad = await postFeedback(
      p.production,
      account.id,
      v.payload.replace('2432232314', '2432232315'),
      headers,
    );
    assert.equal(bad.status, 401);
    assert.equal(bad.body.error.code, 'feedback:unauthenticated');
  });
});
