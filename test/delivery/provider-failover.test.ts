/**
 * End to end across two provider APIs (issue 6 acceptance): an HTTP send routed
 * `["provider-e-api", "provider-a-api"]` meets a throttling Postmark emulator, fails over at
 * once to the SES emulator, and SES's delivery notification (signed as SNS signs it) then
 * yields `mail.delivered` for that message. Real sockets throughout.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { messageShow } from '../../src/operator/messages.js';
import { attachProvider } from '../../src/operator/providers.js';
import { smtpRelayOf } from '../../src/providers/registry.js';
import { relayMessageId } from '../../src/providers/smtpRelay.js';
import { eventsForMessage } from '../../src/store/events.js';
import { assertAccepted } from '../support/assertions.js';
import { startPostmarkEmulator } from '../support/emulators/postmark.js';
import { SesEmulator, SnsSigner } from '../support/emulators/ses.js';
import {
  createProjectWithKeys,
  post,
  repoRoot,
  startTestPostern,
  validMessage,
} from '../support/postern.js';
import { postFeedback } from '../support/providerEmulator.js';
import { HANG_GUARD_MS, scope, waitFor } from '../support/waiting.js';

const SES = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  region: 'us-west-2',
};
const POSTMARK_TOKEN = 'server-token-e2e';
const DOC_MESSAGE_ID = 'EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000';

test('a send pinned to provider-e then provider-a fails over from a throttling provider-e and is marked delivered by provider-a feedback', async (t) => {
  const s = scope(t);
  const clock = new ManualClock(Date.now());
  const signer = s.add(await SnsSigner.create(SES.region), (x) => x.close());
  const p = s.add(
    await startTestPostern({
      clock,
      config: {
        delivery: { enabled: true, poll_interval_ms: 20, retry_ladder_seconds: [60] },
        feedback: { sns_certificate_dir: signer.dir },
      },
    }),
    (x) => x.close(),
  );
  const pk = await createProjectWithKeys(p.ctx, 'e2e', 'pro', { provider: false });
  const postmark = s.add(await startPostmarkEmulator({ serverToken: POSTMARK_TOKEN }), (e) =>
    e.close(),
  );
  postmark.defaultMode = 'throttle';
  const ses = s.add(await SesEmulator.start(SES, { now: () => clock.now() }), (e) => e.close());
  // Attached in the opposite priority order: only the message's routing decides the order.
  const sesAccount = await attachProvider(p.ctx, pk.project.id, {
    slug: 'provider-a-api',
    endpoint: ses.url,
    region: SES.region,
    user: SES.accessKeyId,
    apiKey: SES.secretAccessKey,
    priority: '200',
  });
  const postmarkAccount = await attachProvider(p.ctx, pk.project.id, {
    slug: 'provider-e-api',
    endpoint: postmark.url,
    apiKey: POSTMARK_TOKEN,
    priority: '100',
  });

  const res = await post(p.production, '/v1/send', {
    key: pk.liveKey,
    json: validMessage({
      to: 'recipient@example.com',
      routing: { provider: ['provider-e-api', 'provider-a-api'] },
    }),
  });
  assertAccepted(res, 'queued');
  const id = res.body.id as string;

  const sent = await waitFor(
    async () =>
      (await messageShow(p.ctx, id)).status === 'sent' ? await messageShow(p.ctx, id) : null,
    HANG_GUARD_MS,
    `${id} to be sent`,
  );
  // One hand-off each, in the pinned order: Postmark throttled (its 429), SES took it.
  assert.deepEqual(
    sent.attempts_log.map((a) => [a.provider, a.provider_account_id, a.outcome]),
    [
      ['provider-e-api', postmarkAccount.id, 'temporary'],
      ['provider-a-api', sesAccount.id, 'sent'],
    ],
  );
  assert.equal(postmark.requests.length, 1);
  assert.equal(ses.accepted.length, 1);
  const sesId = ses.accepted[0].messageId;
  assert.equal(sent.provider, 'provider-a-api');
  assert.equal(sent.provider_message_id, sesId);
  assert.equal(sent.attempts_log[1].provider_message_id, sesId);

  // SES's documented Delivery record for that message, published through SNS.
  const record = readFileSync(
    path.join(repoRoot, 'test', 'fixtures', 'providers', 'a', 'event-delivery.json'),
    'utf8',
  ).replaceAll(DOC_MESSAGE_ID, sesId);
  const notification = signer.notification(record, { timestamp: new Date(clock.now()) });
  const fb = await postFeedback(
    p.production,
    sesAccount.id,
    notification.body,
    notification.headers,
  );
  assert.equal(fb.status, 200, fb.text);
  assert.deepEqual(fb.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });

  const shown = await messageShow(p.ctx, id);
  assert.equal(shown.status, 'delivered');
  assert.deepEqual(
    shown.recipient_outcomes.map((o) => [o.email, o.status]),
    [['recipient@example.com', 'delivered']],
  );
  const events = await eventsForMessage(p.ctx.store, id);
  assert.deepEqual(
    events.map((e) => e.type),
    ['mail.accepted', 'mail.sent', 'mail.delivered'],
  );
  const delivered = JSON.parse(events[2].data);
  assert.equal(delivered.mail.uid, id);
  assert.deepEqual(delivered.mail.to, ['recipient@example.com']);
  assert.equal(delivered.delivery.recipient, 'recipient@example.com');
  assert.equal(delivered.delivery.provider, 'provider-a-api');
  assert.equal(delivered.delivery.provider_message_id, sesId);
  const sentEvent = JSON.parse(events[1].data);
  assert.equal(sentEvent.provider, 'provider-a-api');
  assert.equal(sentEvent.provider_message_id, sesId);
});

test('the SMTP relay captures the provider id from Postfix-style and Amazon SES 250 replies', () => {
  assert.equal(
    relayMessageId(smtpRelayOf('smtp')!, '250 2.0.0 Ok: queued as 4Xyz1abC'),
    '4Xyz1abC',
  );
  assert.equal(
    relayMessageId(
      smtpRelayOf('provider-a-smtp')!,
      '250 Ok 0100018c5d6e7f80-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000',
    ),
    '0100018c5d6e7f80-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000',
  );
  // Only SES's relay words it that way; another relay's "250 Ok" carries no id.
  assert.equal(relayMessageId(smtpRelayOf('smtp')!, '250 Ok'), null);
  assert.equal(relayMessageId(smtpRelayOf('provider-b-smtp')!, '250 Ok 12345'), null);
});
