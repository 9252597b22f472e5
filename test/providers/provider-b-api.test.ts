/**
 * provider-b-api (SendGrid v3 Mail Send) end to end: messages come in over real HTTP into an
 * in-process Postern with delivery on, go out over real HTTP to the SendGrid emulator
 * (test/support/emulators/sendgrid.ts), and SendGrid's Signed Event Webhook comes back over
 * real HTTP to the feedback endpoint, signed with a P-256 key the test holds.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { describe, test } from 'node:test';
import type { ManualClock } from '../../src/clock.js';
import { releaseMessage } from '../../src/operator/messages.js';
import { type AttachOptions, attachProvider } from '../../src/operator/providers.js';
import { suppress } from '../../src/operator/suppressions.js';
import { sendgridMessageId } from '../../src/providers/sendgrid/feedback.js';
import { eventsForMessage } from '../../src/store/events.js';
import {
  type ApiKit,
  assertRefused,
  attacherFor,
  requestJson as bodyOf,
  deliveringPostern,
  eventTypes,
  failsOverToSecond,
  failsWithoutFailover,
  feedbackState,
  providerFixture,
  retryWaitsForReset,
  sendOver,
  startedFor,
  statusReached,
} from '../support/emulators/harness.js';
import {
  SENDGRID_TEST_KEY,
  type SendgridEmulator,
  type SendgridEmulatorOptions,
  sendgridMessageIdFor,
  startSendgridEmulator,
} from '../support/emulators/sendgrid.js';
import { createProjectWithKeys } from '../support/postern.js';
import { postFeedback } from '../support/providerEmulator.js';
import { scope } from '../support/waiting.js';

const fixture = (name: string) => providerFixture('b', name);
type Scope = ReturnType<typeof scope>;

async function emulator(s: Scope, opts: SendgridEmulatorOptions = {}): Promise<SendgridEmulator> {
  return startedFor(s, startSendgridEmulator(opts));
}

const attachSendgrid = attacherFor('provider-b-api', { apiKey: SENDGRID_TEST_KEY });

describe('provider-b-api: the Mail Send request', () => {
  test('a full message becomes exactly the documented Mail Send body; 202 X-Message-Id is the provider id', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s);
    const pk = await createProjectWithKeys(p.ctx, 'b golden', 'pro', { provider: false });
    const account = await attachSendgrid(p, pk, emu);

    const id = await sendOver(p, pk, {
      from: 'Example Order Confirmation <orders@example.com>',
      to: ['Alex <alex@example.com>', 'Bola <bola@example.com>'],
      cc: 'Charlie <charlie@example.com>',
      bcc: 'dana@example.com',
      reply_to: 'Example Customer Service Team <customer_service@example.com>',
      subject: 'Your Example Order Confirmation',
      text: 'Hello from Twilio SendGrid!',
      html: '<p>Hello from Twilio SendGrid!</p><p><img src="cid:logo@example.com"></p>',
      headers: {
        'X-Entity-Ref-ID': '123456789',
        'List-Unsubscribe': '<mailto:unsubscribe@example.com>',
      },
      attachments: [
        {
          filename: 'index.html',
          content_type: 'text/html',
          content: JSON.parse(fixture('mail-send.json')).attachments[1].content,
        },
        {
          filename: 'logo.png',
          content_type: 'image/png',
          disposition: 'inline',
          content_id: 'logo@example.com',
          content:
            'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
        },
      ],
      tags: ['cake', 'pie', 'baking'],
      category: 'Order confirmation',
      metadata: { order_id: '123abc456def789hij0' },
    });
    const shown = await statusReached(p, id, 'sent');

    assert.equal(emu.requests.length, 1);
    const req = emu.requests[0];
    assert.equal(req.method, 'POST');
    assert.equal(req.url, '/v3/mail/send');
    assert.equal(req.headers.authorization, `Bearer ${SENDGRID_TEST_KEY}`);
    assert.equal(req.headers['content-type'], 'application/json');
    // Exact: the same keys, in the same order, with the same values (only our id varies).
    const expected = JSON.parse(fixture('mail-send.json').replaceAll('{{MESSAGE_ID}}', id));
    assert.equal(JSON.stringify(JSON.parse(req.body.toString('utf8'))), JSON.stringify(expected));

    const xMessageId = sendgridMessageIdFor(1);
    assert.equal(shown.provider, 'provider-b-api');
    assert.equal(shown.provider_message_id, xMessageId);
    assert.deepEqual(
      shown.attempts_log.map((a) => [a.provider_account_id, a.outcome, a.reply]),
      [[account.id, 'sent', `202 Accepted X-Message-Id: ${xMessageId}`]],
    );
    const sent = (await eventsForMessage(p.ctx.store, id)).find((e) => e.type === 'mail.sent')!;
    assert.equal(JSON.parse(sent.data).provider_message_id, xMessageId);
  });

  test('only Bcc recipients owed (the To is suppressed): each gets its own personalization, no address shown to another', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s);
    const pk = await createProjectWithKeys(p.ctx, 'b bcc', 'pro', { provider: false });
    await attachSendgrid(p, pk, emu);
    const id = await sendOver(
      p,
      pk,
      { to: 'gone@example.org', bcc: ['b1@example.net', 'b2@example.net'], paused: true },
      'paused',
    );
    // Suppressed after acceptance (checked again at hand-off), then released.
    await suppress(p.ctx, pk.project.id, 'gone@example.org');
    await releaseMessage(p.ctx, id);
    await statusReached(p, id, 'sent');
    assert.deepEqual(bodyOf(emu, 0).personalizations, [
      { to: [{ email: 'b1@example.net' }] },
      { to: [{ email: 'b2@example.net' }] },
    ]);
  });
});

const kit: ApiKit<SendgridEmulator> = {
  start: (s) => emulator(s),
  attach: attachSendgrid,
  firstId: sendgridMessageIdFor(1),
};

describe('provider-b-api: SendGrid answers drive the delivery engine', () => {
  const cases: [string, (first: SendgridEmulator) => Partial<AttachOptions> | void, string][] = [
    ['429 too many requests', (first) => void first.behave('throttle'), 'temporary'],
    ['500 internal server error', (first) => void first.behave('server_error'), 'temporary'],
    [
      '401 authorization grant invalid (suspended or revoked key)',
      (first) => void first.behave('suspended'),
      'account',
    ],
    ['401 for a key SendGrid does not know', () => ({ apiKey: 'SG.not-this-one' }), 'account'],
    [
      '403 from address not a verified Sender Identity',
      (first) => {
        first.sendgrid.verifiedSenders = ['@elsewhere.example'];
      },
      'account',
    ],
    [
      '404 from a wrong --endpoint (the account, not the message)',
      (first) => ({ endpoint: `${first.url}/wrong` }),
      'account',
    ],
  ];
  for (const [name, arrange, outcome] of cases) {
    test(`${name}: the next account sends it at once`, (t) =>
      failsOverToSecond(t, kit, arrange, outcome));
  }

  test('400 (the message refused) fails it: no other account is tried', async (t) => {
    const lastError = await failsWithoutFailover(t, kit);
    assert.equal(
      lastError,
      '400 content.0.value: The content value must be a string at least one character in length.',
    );
  });

  test('429 X-RateLimit-Reset is honoured: the retry waits for the reset, not the ladder', async (t) => {
    const throttling = (s: Scope, clock: ManualClock) =>
      emulator(s, { now: () => clock.now(), resetAfterSeconds: 120 });
    const lastError = await retryWaitsForReset(t, kit, throttling, 120_000);
    assert.equal(lastError, 'provider-b-api: 429 too many requests');
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Signed Event Webhook                                                                        */
/* ------------------------------------------------------------------------------------------ */

interface Signer {
  publicKey: string;
  privateKey: KeyObject;
}

function newSigner(): Signer {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  // As the SendGrid app shows the verification key: base64 of the DER SPKI.
  return {
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    privateKey,
  };
}

function signed(
  signer: Signer,
  body: string,
  timestamp = String(Math.floor(Date.now() / 1000)),
): Record<string, string> {
  const signature = sign('sha256', Buffer.concat([Buffer.from(timestamp), Buffer.from(body)]), {
    key: signer.privateKey,
    dsaEncoding: 'der',
  }).toString('base64');
  return {
    'X-Twilio-Email-Event-Webhook-Signature': signature,
    'X-Twilio-Email-Event-Webhook-Timestamp': timestamp,
  };
}

/** The documented events for one message, as SendGrid posts them. */
function documentedEvents(xMessageId: string, messageId: string, only?: string[]): string {
  const events = JSON.parse(
    fixture('events.json')
      .replaceAll('{{SG_MESSAGE_ID}}', `${xMessageId}.filterdrecv-5645d9c87f-78xsx-1-5F3A6E29-3D.0`)
      .replaceAll('{{MESSAGE_ID}}', messageId)
      .replaceAll('"{{TIMESTAMP}}"', String(Math.floor(Date.now() / 1000))),
  ) as Record<string, unknown>[];
  return JSON.stringify(only ? events.filter((e) => only.includes(e.event as string)) : events);
}

describe('provider-b feedback: the Signed Event Webhook', () => {
  test('documented events become exactly the normalized events and suppressions; duplicates, unknown ids, bad signatures, stale and replayed posts', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s);
    const signer = newSigner();
    const pk = await createProjectWithKeys(p.ctx, 'b feedback', 'pro', { provider: false });
    const account = await attachSendgrid(p, pk, emu, { webhookPublicKey: signer.publicKey });
    const id = await sendOver(p, pk, {
      to: ['Alex <alex@example.com>', 'bola@example.com'],
      cc: 'charlie@example.com',
      bcc: 'dana@example.com',
    });
    const xMessageId = (await statusReached(p, id, 'sent')).provider_message_id!;
    const feedback = (body: string, headers: Record<string, string>) =>
      postFeedback(p.production, account.id, body, headers);
    const state = () => feedbackState(p, pk, id);

    // Refused before anything: no signature, a signature by another key, a tampered body, a stale timestamp.
    const body = documentedEvents(xMessageId, id);
    await assertRefused(
      feedback,
      body,
      [
        [{}, 401, 'feedback:unauthenticated'],
        [signed(newSigner(), body), 401, 'feedback:unauthenticated'],
        [signed(signer, `${body} `), 401, 'feedback:unauthenticated'],
        [signed(signer, body, String(Math.floor(Date.now() / 1000) - 400)), 401, 'feedback:stale'],
        [signed(signer, body, String(Math.floor(Date.now() / 1000) + 400)), 401, 'feedback:stale'],
      ],
      state,
    );

    // The documented batch: processed, open and click are not feedback.
    const headers = signed(signer, body);
    const res = await feedback(body, headers);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {
      received: 6,
      applied: 6,
      duplicates: 0,
      unknown: 0,
      note: '3 event(s) that are not delivery feedback ignored',
    });
    const after = await state();
    assert.deepEqual(after.events, [
      'mail.accepted',
      'mail.sent',
      'mail.delivered',
      'mail.bounced',
      'mail.failed',
      'mail.complained',
    ]);
    assert.deepEqual(after.suppressions, [
      ['alex@example.com', 'complaint'],
      ['bola@example.com', 'hard_bounce'],
    ]);
    assert.deepEqual(after.outcomes, [
      { email: 'alex@example.com', status: 'complained', reply: 'spamreport' },
      { email: 'bola@example.com', status: 'bounced', reply: '500 unknown recipient' },
      { email: 'charlie@example.com', status: 'soft_bounced', reply: '400 try again later' },
      { email: 'dana@example.com', status: 'failed', reply: 'Bounced Address' },
    ]);
    assert.equal(after.status, 'complained');
    const evs = (await eventsForMessage(p.ctx.store, id)).map((e) => JSON.parse(e.data));
    assert.deepEqual(
      { ...evs[3].bounce, occurred_at: undefined },
      {
        recipient: 'bola@example.com',
        provider: 'provider-b-api',
        provider_message_id: xMessageId,
        occurred_at: undefined,
        type: 'hard',
        subtype: 'bounce',
        reply: '500 unknown recipient',
      },
    );

    // The exact same signed request again: a replay, refused.
    const replay = await feedback(body, headers);
    assert.equal(replay.status, 406, replay.text);
    assert.equal(replay.body.error.code, 'feedback:replayed');

    // SendGrid retrying the batch (signed anew): acknowledged, nothing applied twice.
    const retry = await feedback(body, signed(signer, body));
    assert.deepEqual(retry.body, {
      received: 6,
      applied: 0,
      duplicates: 6,
      unknown: 0,
      note: '3 event(s) that are not delivery feedback ignored',
    });
    assert.deepEqual(await state(), after);

    // An id Postern never handed off: logged and acknowledged.
    const unknown = documentedEvents('AAAAAAAAAAAAAAAAAAAAAA', 'm.00000000000000000000000000', [
      'delivered',
    ]);
    const unknownRes = await feedback(unknown, signed(signer, unknown));
    assert.equal(unknownRes.status, 200);
    assert.deepEqual(unknownRes.body, { received: 1, applied: 0, duplicates: 0, unknown: 1 });
    assert.deepEqual(await state(), after);

    // Not an array of events: malformed (authenticated, so the signature is checked first).
    const notArray = JSON.stringify({ event: 'delivered' });
    const malformed = await feedback(notArray, signed(signer, notArray));
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.error.code, 'feedback:malformed');
  });

  test('matched by our postern_message_id custom arg when the sg_message_id is not the one stored', async (t) => {
    const s = scope(t);
    const emu = await emulator(s);
    const p = await deliveringPostern(s);
    const signer = newSigner();
    const pk = await createProjectWithKeys(p.ctx, 'b custom arg', 'pro', { provider: false });
    const account = await attachSendgrid(p, pk, emu, { webhookPublicKey: signer.publicKey });
    const id = await sendOver(p, pk, { to: 'alex@example.com' });
    await statusReached(p, id, 'sent');
    const body = documentedEvents('SomeOtherXMessageId0000', id, ['delivered']);
    const res = await postFeedback(p.production, account.id, body, signed(signer, body));
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.sent', 'mail.delivered']);
  });

  test('the documented test vector (SendGrid’s own key, signature, timestamp) verifies: refused only as stale; one changed byte is unauthenticated', async (t) => {
    const s = scope(t);
    const p = await deliveringPostern(s);
    const vector = JSON.parse(fixture('signed-event-webhook-vector.json')) as Record<
      string,
      string
    >;
    const pk = await createProjectWithKeys(p.ctx, 'b vector', 'pro', { provider: false });
    const account = await attachProvider(p.ctx, pk.project.id, {
      slug: 'provider-b-api',
      apiKey: SENDGRID_TEST_KEY,
      webhookPublicKey: vector.public_key,
    });
    const headers = {
      'X-Twilio-Email-Event-Webhook-Signature': vector.signature,
      'X-Twilio-Email-Event-Webhook-Timestamp': vector.timestamp,
    };
    const good = await postFeedback(p.production, account.id, vector.payload, headers);
    assert.equal(good.status, 401);
    assert.equal(good.body.error.code, 'feedback:stale');
    const bad = await postFeedback(
      p.production,
      account.id,
      vector.payload.replace('test_event', 'test_evenT'),
      headers,
    );
    assert.equal(bad.status, 401);
    assert.equal(bad.body.error.code, 'feedback:unauthenticated');
  });

  test('sg_message_id forms map back to the X-Message-Id', () => {
    assert.equal(
      sendgridMessageId('W8z3AxwORXOLJ9oHxBdLtQ.filterdrecv-5645d9c87f-78xsx-1-5F3A6E29-3D.0'),
      'W8z3AxwORXOLJ9oHxBdLtQ',
    );
    assert.equal(
      sendgridMessageId('5lFl7Fr1Rjme_EyzNNB_5A.stfilter-015.5185.55F883172.0'),
      '5lFl7Fr1Rjme_EyzNNB_5A',
    );
    assert.equal(
      sendgridMessageId('14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0'),
      '14c5d75ce93.dfd.64b469',
    );
    assert.equal(sendgridMessageId('W8z3AxwORXOLJ9oHxBdLtQ'), 'W8z3AxwORXOLJ9oHxBdLtQ');
  });
});
