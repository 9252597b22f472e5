/**
 * GET /metrics on the console listener (issue 21): after HTTP and SMTP sends, refusals, a
 * hand-off that fails over from a throttling provider to one that takes the message, that
 * provider's delivery feedback and a webhook, every counter moved by exactly what happened, and
 * the text parses as the Prometheus exposition format. Real sockets throughout.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { messageShow } from '../../src/operator/messages.js';
import { attachProvider } from '../../src/operator/providers.js';
import { addWebhook } from '../../src/operator/webhookEndpoints.js';
import { startMailgunEmulator } from '../support/emulators/mailgun.js';
import { SesEmulator, SnsSigner } from '../support/emulators/ses.js';
import {
  createProjectWithKeys,
  post,
  repoRoot,
  startTestPostern,
  validMessage,
} from '../support/postern.js';
import { parseExposition } from '../support/prometheusText.js';
import { postFeedback } from '../support/providerEmulator.js';
import { starttlsTransport } from '../support/smtpTransport.js';
import { HANG_GUARD_MS, scope, waitFor } from '../support/waiting.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const SES = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  region: 'us-west-2',
};
const MAILGUN = { apiKey: 'key-metrics-0123456789', domain: 'mg.example.com' };
const DOC_MESSAGE_ID = 'EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000';
const TOKEN = 'metrics-token-0123456789';

/** One scrape, parsed strictly (test/support/prometheusText.ts throws on anything not the text format). */
async function scrape(consoleUrl: string): Promise<Map<string, number>> {
  const res = await fetch(`${consoleUrl}/metrics`, {
    headers: { Authorization: `Bearer ${TOKEN}` },
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** How much each series moved between two scrapes (series absent before count from 0). */
function moved(before: Map<string, number>, after: Map<string, number>, key: string): number {
  return (after.get(key) ?? 0) - (before.get(key) ?? 0);
}

test('the counters move by exactly what happened: sends by door, refusals by code, hand-offs by provider and outcome, feedback, webhooks, commit groups, HTTP requests', async (t) => {
  const s = scope(t);
  const signer = s.add(await SnsSigner.create(SES.region), (x) => x.close());
  const hooks = s.add(await WebhookReceiver.start(), (r) => r.close());
  const p = s.add(
    await startTestPostern({
      smtp: true,
      console: true,
      config: {
        metrics: { token: TOKEN },
        delivery: { enabled: true, poll_interval_ms: 20, retry_ladder_seconds: [60] },
        feedback: { sns_certificate_dir: signer.dir },
        webhooks: {
          allow_private_targets: true,
          poll_interval_ms: 20,
          nice: 0,
          saturated_cpu_share: 64,
        },
      },
    }),
    (x) => x.close(),
  );
  const pk = await createProjectWithKeys(p.ctx, 'metrics', 'pro', { provider: false });
  // The provider that fails: Mailgun throttling, with a Retry-After the scheduler then rests the account for.
  const mailgun = s.add(await startMailgunEmulator({ ...MAILGUN, retryAfterSeconds: 600 }), (e) =>
    e.close(),
  );
  mailgun.defaultMode = 'throttle';
  const ses = s.add(await SesEmulator.start(SES), (e) => e.close());
  const sesAccount = await attachProvider(p.ctx, pk.project.id, {
    slug: 'provider-a-api',
    endpoint: ses.url,
    region: SES.region,
    user: SES.accessKeyId,
    apiKey: SES.secretAccessKey,
    priority: '200',
  });
  await attachProvider(p.ctx, pk.project.id, {
    slug: 'provider-c-api',
    endpoint: mailgun.url,
    apiKey: MAILGUN.apiKey,
    domain: MAILGUN.domain,
    priority: '100',
  });
  await addWebhook(p.ctx, pk.project.id, `http://127.0.0.1:${hooks.port}/hook`, 'mail.delivered');

  const before = await scrape(p.console);

  // Refused: a bad key (401), a body the rules refuse (422).
  const badKey = await post(p.production, '/v1/send', {
    key: `ps_live_${'x'.repeat(40)}`,
    json: validMessage(),
  });
  assert.equal(badKey.status, 401);
  const invalid = await post(p.production, '/v1/send', {
    key: pk.liveKey,
    json: validMessage({ from: undefined }),
  });
  assert.equal(invalid.status, 422);
  const invalidCode = invalid.body.error.code as string;

  // Accepted: one HTTP send (production, delivered through the fail-over), one SMTP send (sandbox: captured).
  const res = await post(p.production, '/v1/send', {
    key: pk.liveKey,
    json: validMessage({
      to: 'recipient@example.com',
      routing: { provider: ['provider-c-api', 'provider-a-api'] },
    }),
  });
  assert.equal(res.status, 202, res.text);
  const id = res.body.id as string;
  const transport = starttlsTransport(p.smtp.sandbox.starttls, pk.testKey);
  try {
    await transport.sendMail({
      from: 'sender@example.com',
      to: 'rcpt@example.org',
      subject: 'Metrics',
      text: 'By SMTP',
    });
  } finally {
    transport.close();
  }

  await waitFor(
    async () => (await messageShow(p.ctx, id)).status === 'sent',
    HANG_GUARD_MS,
    `${id} to be sent`,
  );
  const record = readFileSync(
    path.join(repoRoot, 'test', 'fixtures', 'providers', 'a', 'event-delivery.json'),
    'utf8',
  ).replaceAll(DOC_MESSAGE_ID, ses.accepted[0].messageId);
  const notification = signer.notification(record, { timestamp: new Date() });
  const fb = await postFeedback(
    p.production,
    sesAccount.id,
    notification.body,
    notification.headers,
  );
  assert.equal(fb.status, 200, fb.text);
  await hooks.waitFor(1, '/hook');
  // The dispatcher records the outcome after the receiver answered.
  await waitFor(
    async () =>
      moved(
        before,
        await scrape(p.console),
        'postern_webhook_deliveries_total{outcome=delivered}',
      ) === 1,
    HANG_GUARD_MS,
    'the webhook outcome to be recorded',
  );

  const after = await scrape(p.console);
  const m = (key: string) => moved(before, after, key);
  assert.equal(m('postern_messages_accepted_total{door=http,environment=production}'), 1);
  assert.equal(m('postern_messages_accepted_total{door=smtp,environment=sandbox}'), 1);
  assert.equal(m('postern_messages_accepted_total{door=smtp,environment=production}'), 0);
  assert.equal(m('postern_refusals_total{code=invalid_api_key,door=http}'), 1);
  assert.equal(m(`postern_refusals_total{code=${invalidCode},door=http}`), 1);
  assert.equal(m('postern_handoff_attempts_total{outcome=temporary,provider=provider-c-api}'), 1);
  assert.equal(m('postern_handoff_attempts_total{outcome=sent,provider=provider-a-api}'), 1);
  assert.equal(m('postern_handoff_duration_seconds_count{provider=provider-c-api}'), 1);
  assert.equal(m('postern_handoff_duration_seconds_count{provider=provider-a-api}'), 1);
  assert.equal(m('postern_provider_feedback_total{kind=delivered}'), 1);
  assert.equal(m('postern_webhook_deliveries_total{outcome=delivered}'), 1);
  assert.equal(m('postern_webhook_deliveries_total{outcome=failed}'), 0);
  // The two acceptances were committed in one or two groups (the index writer thread's figures).
  assert.equal(m('postern_commit_group_size_sum{}'), 2);
  assert.ok(
    m('postern_commit_group_size_count{}') >= 1 && m('postern_commit_group_size_count{}') <= 2,
  );
  assert.equal(
    m('postern_commit_duration_seconds_count{}'),
    m('postern_commit_group_size_count{}'),
  );
  assert.equal(m('postern_http_requests_total{listener=send,route=/v1/send,status=202}'), 1);
  assert.equal(m('postern_http_requests_total{listener=send,route=/v1/send,status=401}'), 1);
  assert.equal(m('postern_http_requests_total{listener=send,route=/v1/send,status=422}'), 1);
  assert.equal(m('postern_http_requests_total{listener=send,route=/v1/feedback,status=200}'), 1);

  // State, read at scrape time.
  assert.equal(after.get('postern_messages{status=delivered}'), 1);
  assert.equal(after.get('postern_messages{status=captured}'), 1);
  assert.equal(after.get('postern_messages{status=queued}'), 0);
  assert.equal(after.get('postern_oldest_waiting_message_age_seconds{}'), 0);
  assert.equal(after.get('postern_webhook_backlog{}'), 0);
  assert.equal(after.get('postern_smtp_sessions_open{}'), 0);
  assert.equal(
    after.get('postern_provider_accounts_throttled{}'),
    1,
    'the throttled Mailgun account is rested',
  );
  assert.ok((after.get('postern_state_disk_free_bytes{}') ?? 0) > 0);
  assert.ok((after.get('postern_nodejs_eventloop_lag_seconds{}') ?? -1) >= 0);

  // Every metric the dashboard and the Metrics table (docs/operations.md) name is served.
  const families = new Set(
    [...after.keys()].map((k) => k.slice(0, k.indexOf('{')).replace(/_(bucket|sum|count)$/, '')),
  );
  const dashboard = readFileSync(path.join(repoRoot, 'contrib', 'grafana-dashboard.json'), 'utf8');
  const readme = readFileSync(path.join(repoRoot, 'docs', 'operations.md'), 'utf8');
  const metricsTable = readme.slice(readme.indexOf('## Metrics'), readme.indexOf('## Readiness'));
  const named = new Set(
    [
      ...dashboard.matchAll(/postern_[a-z0-9_]+/g),
      ...metricsTable.matchAll(/`(postern_[a-z0-9_]+)`/g),
    ].map((m) => (m[1] ?? m[0]).replace(/_(bucket|sum|count)$/, '')),
  );
  assert.ok(named.size >= 20);
  // Served only with tls.acme, which this server has not: test/tls/acme.test.ts reads it.
  const acmeOnly = ['postern_certificate_order_failures_total'];
  for (const name of named)
    if (!acmeOnly.includes(name))
      assert.ok(
        families.has(name),
        `${name} (named in the dashboard or docs/operations.md) is served`,
      );
  assert.ok(
    acmeOnly.every((name) => named.has(name)),
    'docs/operations.md names the ACME metrics',
  );
});

test('GET /metrics needs the token when one is set, and is not served when metrics are off', async (t) => {
  const s = scope(t);
  const guarded = s.add(
    await startTestPostern({ console: true, config: { metrics: { token: TOKEN } } }),
    (x) => x.close(),
  );
  const none = await fetch(`${guarded.console}/metrics`);
  assert.equal(none.status, 401);
  assert.equal(((await none.json()) as { error: { code: string } }).error.code, 'unauthenticated');
  const wrong = await fetch(`${guarded.console}/metrics`, {
    headers: { Authorization: `Bearer ${TOKEN}x` },
  });
  assert.equal(wrong.status, 401);

  const off = s.add(
    await startTestPostern({ console: true, config: { metrics: { enabled: false } } }),
    (x) => x.close(),
  );
  assert.equal((await fetch(`${off.console}/metrics`)).status, 404);
});
