/**
 * Provider accounts in the console API (owners only): attach, list, set priority and free
 * quota, detach, and the connection check — SMTP against a real relay (connect, STARTTLS,
 * AUTH, QUIT) and every HTTP API against its local emulator's documented no-send call — and
 * provider health in the overview.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { generate } from 'selfsigned';
import {
  ConsoleClient,
  expectError,
  expectStatus,
  operatorAccount,
  PASSWORD,
} from '../support/console.js';
import { startBrevoEmulator } from '../support/emulators/brevo.js';
import { startMailgunEmulator } from '../support/emulators/mailgun.js';
import { startPostmarkEmulator } from '../support/emulators/postmark.js';
import { RESEND_TEST_KEY, startResendEmulator } from '../support/emulators/resend.js';
import { SENDGRID_TEST_KEY, startSendgridEmulator } from '../support/emulators/sendgrid.js';
import { SesEmulator } from '../support/emulators/ses.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { Sink } from '../support/relaySink.js';
import { waitFor } from '../support/waiting.js';

describe('console providers', () => {
  let p: TestPostern;
  let pk: ProjectWithKeys;
  let owner: ConsoleClient;
  const closers: (() => Promise<unknown>)[] = [];

  before(async () => {
    p = await startTestPostern({ console: true });
    pk = await createProjectWithKeys(p.ctx, 'providers', 'pro', { provider: false });
    await operatorAccount(p.ctx, 'owner@example.com', 'owner');
    owner = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
  });
  after(async () => {
    await p?.close();
    for (const close of closers) await close();
  });

  const attach = async (body: Record<string, unknown>) =>
    expectStatus(await owner.post(`/projects/${pk.project.id}/providers`, body), 201);
  const check = async (id: string) => expectStatus(await owner.post(`/providers/${id}/check`), 200);

  test('attach shows whether each secret is set, never the secret; priority and free quota change; detach', async () => {
    const account = await attach({
      slug: 'smtp',
      host: '127.0.0.1',
      port: 2525,
      user: 'relay-user',
      pass: 'relay-secret-password',
      tls: 'none',
      priority: 5,
    });
    assert.deepEqual(account.credentials, { pass: true, api_key: false, webhook_secret: false });
    assert.deepEqual(
      [
        account.slug,
        account.host,
        account.port,
        account.user,
        account.priority,
        account.free_quota,
      ],
      ['smtp', '127.0.0.1', 2525, 'relay-user', 5, null],
    );
    const listed = expectStatus(await owner.get(`/projects/${pk.project.id}/providers`), 200);
    assert.ok(!JSON.stringify(listed).includes('relay-secret-password'));
    const changed = expectStatus(
      await owner.patch(`/providers/${account.id}`, { priority: 1, free_quota: 3000 }),
      200,
    );
    assert.deepEqual([changed.priority, changed.free_quota], [1, 3000]);
    assert.equal(
      expectStatus(await owner.patch(`/providers/${account.id}`, { free_quota: null }), 200)
        .free_quota,
      null,
    );
    expectError(await owner.patch(`/providers/${account.id}`, {}), 422, 'body:required');
    expectError(
      await owner.post(`/projects/${pk.project.id}/providers`, { slug: 'smtp' }),
      422,
      'host:invalid_value',
    );
    expectError(
      await owner.post(`/projects/${pk.project.id}/providers`, { slug: 'provider-z-api' }),
      422,
      'slug:invalid_value',
    );
    assert.deepEqual(expectStatus(await owner.delete(`/providers/${account.id}`), 200), {
      id: account.id,
      detached: true,
    });
    expectError(await owner.delete(`/providers/${account.id}`), 404, 'not_found');
    expectError(await owner.post(`/providers/${account.id}/check`), 404, 'not_found');
  });

  test('vendor and label; the feedback URL carries its secret only in the answer that set it; credentials are replaced, never shown', async () => {
    const account = await attach({
      slug: 'provider-f-api',
      api_key: 'brevo-key-1',
      webhook_secret: 'brevo-hook-1',
      label: '  newsletters  ',
    });
    assert.deepEqual([account.vendor, account.label], ['Brevo API', 'newsletters']);
    assert.match(
      account.feedback_url,
      new RegExp(`^https?://[^/]+/v1/feedback/${account.id}/brevo-hook-1$`),
    );
    const listed = expectStatus(
      await owner.get(`/projects/${pk.project.id}/providers`),
      200,
    ).providers.find((a: { id: string }) => a.id === account.id);
    assert.equal(listed.feedback_url, account.feedback_url.replace(/brevo-hook-1$/, '••••••••'));
    assert.ok(!JSON.stringify(listed).includes('brevo-key-1'));
    const relabelled = expectStatus(
      await owner.patch(`/providers/${account.id}`, { label: null, api_key: 'brevo-key-2' }),
      200,
    );
    assert.deepEqual([relabelled.label, relabelled.feedback_url], [null, listed.feedback_url]);
    const rekeyed = expectStatus(
      await owner.patch(`/providers/${account.id}`, { webhook_secret: 'brevo-hook-2' }),
      200,
    );
    assert.equal(
      rekeyed.feedback_url,
      account.feedback_url.replace(/brevo-hook-1$/, 'brevo-hook-2'),
    );
    expectError(await owner.patch(`/providers/${account.id}`, { pass: '' }), 422, 'pass:too_short');
    const stored = (await p.ctx.store.get<{ secrets: string }>(
      'SELECT secrets FROM provider_accounts WHERE id = ?',
      account.id,
    ))!;
    assert.deepEqual(JSON.parse(stored.secrets), {
      api_key: 'brevo-key-2',
      webhook_secret: 'brevo-hook-2',
    });
    // A provider that signs its notifications gets a URL without a secret; the plain relay has none.
    const signed = await attach({
      slug: 'provider-c-api',
      api_key: 'mg-key',
      domain: 'mg.example',
      webhook_secret: 'mg-signing-key',
    });
    assert.deepEqual(
      [signed.vendor, signed.feedback_url.endsWith(`/v1/feedback/${signed.id}`)],
      ['Mailgun API', true],
    );
    const relay = await attach({ slug: 'smtp', host: '127.0.0.1', port: 9, tls: 'none' });
    assert.deepEqual([relay.vendor, relay.feedback_url], ['Any SMTP relay', null]);
    for (const id of [account.id, signed.id, relay.id])
      expectStatus(await owner.delete(`/providers/${id}`), 200);
  });

  test('an SMTP relay check connects, starts TLS, authenticates and quits; a wrong password fails at auth, a missing relay at connect, a relay without STARTTLS at tls', async () => {
    const pems = await generate([{ name: 'commonName', value: 'relay.test' }], { keySize: 2048 });
    const relay = await Sink.start('checked', {
      tls: { key: pems.private, cert: pems.cert },
      credentials: { user: 'relay-user', pass: 'relay-secret-password' },
    });
    const plain = await Sink.start('plain', {});
    closers.push(
      () => relay.close(),
      () => plain.close(),
    );
    const good = await attach({
      slug: 'smtp',
      host: '127.0.0.1',
      port: relay.port,
      tls: 'starttls',
      user: 'relay-user',
      pass: 'relay-secret-password',
    });
    const result = await check(good.id);
    assert.deepEqual(
      { ...result, duration_ms: 0 },
      {
        id: good.id,
        slug: 'smtp',
        checkable: true,
        ok: true,
        checked: `smtp://127.0.0.1:${relay.port} (STARTTLS, AUTH)`,
        failed_at: null,
        message: 'connected, TLS and AUTH accepted',
        duration_ms: 0,
      },
    );
    assert.equal(relay.received.length, 0, 'nothing was sent');

    const wrong = await attach({
      slug: 'smtp',
      host: '127.0.0.1',
      port: relay.port,
      tls: 'starttls',
      user: 'relay-user',
      pass: 'not-the-password',
    });
    const refused = await check(wrong.id);
    assert.deepEqual([refused.ok, refused.failed_at], [false, 'auth']);
    assert.match(refused.message, /535/);
    assert.ok(!JSON.stringify(refused).includes('not-the-password'));

    const closed = await attach({ slug: 'smtp', host: '127.0.0.1', port: 9, tls: 'starttls' });
    const unreachable = await check(closed.id);
    assert.deepEqual([unreachable.ok, unreachable.failed_at], [false, 'connect']);

    const noTls = await attach({
      slug: 'smtp',
      host: '127.0.0.1',
      port: plain.port,
      tls: 'starttls',
    });
    const tls = await check(noTls.id);
    assert.deepEqual([tls.ok, tls.failed_at], [false, 'tls']);
  });

  test('every HTTP API slug is checked with its provider’s authenticated call that sends nothing', async () => {
    const ses = await SesEmulator.start({
      accessKeyId: 'AKIAPOSTERNTEST',
      secretAccessKey: 'ses-secret-key',
      region: 'eu-west-1',
    });
    const sendgrid = await startSendgridEmulator();
    const mailgunOptions = {
      apiKey: 'mg-private-key',
      domain: 'mg.example.com',
      sendingKeyOnly: false,
    };
    const mailgun = await startMailgunEmulator(mailgunOptions);
    const resend = await startResendEmulator();
    const postmark = await startPostmarkEmulator({ serverToken: 'pm-server-token' });
    const brevo = await startBrevoEmulator({ apiKey: 'brevo-api-key' });
    closers.push(
      () => ses.close(),
      () => sendgrid.close(),
      () => mailgun.close(),
      () => resend.close(),
      () => postmark.close(),
      () => brevo.close(),
    );

    const cases: [Record<string, unknown>, string, string][] = [
      [
        {
          slug: 'provider-a-api',
          endpoint: ses.url,
          region: 'eu-west-1',
          user: 'AKIAPOSTERNTEST',
          api_key: 'ses-secret-key',
        },
        'GET /v2/email/account',
        'sending enabled',
      ],
      [
        { slug: 'provider-b-api', endpoint: sendgrid.url, api_key: SENDGRID_TEST_KEY },
        'GET /v3/scopes',
        'key accepted, with the mail.send scope',
      ],
      [
        {
          slug: 'provider-c-api',
          endpoint: mailgun.url,
          domain: 'mg.example.com',
          api_key: 'mg-private-key',
        },
        'GET /v3/domains/mg.example.com',
        'domain mg.example.com is active',
      ],
      [
        { slug: 'provider-d-api', endpoint: resend.url, api_key: RESEND_TEST_KEY },
        'GET /domains',
        'key accepted (full access)',
      ],
      [
        { slug: 'provider-e-api', endpoint: postmark.url, api_key: 'pm-server-token' },
        'GET /server',
        'server token accepted',
      ],
      [
        { slug: 'provider-f-api', endpoint: brevo.url, api_key: 'brevo-api-key' },
        'GET /v3/account',
        'API key accepted',
      ],
    ];
    for (const [body, call, message] of cases) {
      const account = await attach(body);
      const result = await check(account.id);
      assert.deepEqual(
        [result.checkable, result.ok, result.failed_at, result.message],
        [true, true, null, message],
        `${body.slug}: ${JSON.stringify(result)}`,
      );
      assert.equal(result.checked, `${call.split(' ')[0]} ${body.endpoint}${call.split(' ')[1]}`);
      const wrongKey = await attach({ ...body, api_key: 'a-wrong-key' });
      const refused = await check(wrongKey.id);
      assert.deepEqual(
        [refused.ok, refused.failed_at],
        [false, 'auth'],
        `${body.slug} with a wrong key: ${JSON.stringify(refused)}`,
      );
      assert.ok(!JSON.stringify(refused).includes('a-wrong-key'));
    }
    for (const emu of [ses.emulator, sendgrid, mailgun, resend, postmark, brevo])
      assert.ok(
        emu.requests.every((r) => r.method === 'GET'),
        'nothing was sent',
      );

    // What the provider says about the account decides, not only whether the key is known.
    sendgrid.sendgrid.scopes = ['user.profile.read'];
    const noSend = await attach({
      slug: 'provider-b-api',
      endpoint: sendgrid.url,
      api_key: SENDGRID_TEST_KEY,
    });
    const lacking = await check(noSend.id);
    assert.deepEqual(
      [lacking.ok, lacking.failed_at, lacking.message],
      [false, 'request', 'key accepted, but it lacks the mail.send scope'],
    );
    resend.resend.sendingAccessOnly = true;
    const sendingOnly = await attach({
      slug: 'provider-d-api',
      endpoint: resend.url,
      api_key: RESEND_TEST_KEY,
    });
    const restricted = await check(sendingOnly.id);
    assert.deepEqual(
      [restricted.ok, restricted.message],
      [true, 'key accepted (sending access only)'],
    );
    // A Mailgun domain sending key may only send: the check cannot prove it and says so.
    mailgunOptions.sendingKeyOnly = true;
    const sendingKey = await attach({
      slug: 'provider-c-api',
      endpoint: mailgun.url,
      domain: 'mg.example.com',
      api_key: 'mg-private-key',
    });
    const unproven = await check(sendingKey.id);
    assert.deepEqual([unproven.ok, unproven.failed_at], [false, 'auth']);
    assert.match(unproven.message, /^401 Forbidden \(a domain sending key may only send/);
    ses.sendingEnabled = false;
    const paused = await attach({
      slug: 'provider-a-api',
      endpoint: ses.url,
      region: 'eu-west-1',
      user: 'AKIAPOSTERNTEST',
      api_key: 'ses-secret-key',
    });
    const off = await check(paused.id);
    assert.deepEqual([off.ok, off.message], [false, 'sending is paused on this account']);
  });
});

describe('provider health in the overview', () => {
  test('hand-offs and failures of the last hour, the last error and the throttled-until time of each account', async (t) => {
    const sendgrid = await startSendgridEmulator({ resetAfterSeconds: 600 });
    const p = await startTestPostern({
      console: true,
      config: { delivery: { enabled: true, poll_interval_ms: 20 } },
    });
    t.after(async () => {
      await p.close();
      await sendgrid.close();
    });
    const pk = await createProjectWithKeys(p.ctx, 'health', 'pro', { provider: false });
    await operatorAccount(p.ctx, 'owner@example.com', 'owner');
    const owner = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);
    const account = expectStatus(
      await owner.post(`/projects/${pk.project.id}/providers`, {
        slug: 'provider-b-api',
        endpoint: sendgrid.url,
        api_key: SENDGRID_TEST_KEY,
      }),
      201,
    );
    sendgrid.behave('throttle');
    const sentAt = Date.now();
    const sent = await post(p.production, '/v1/send', { key: pk.liveKey, json: validMessage() });
    assert.equal(sent.status, 202, sent.text);
    await waitFor(() => sendgrid.requests.length === 1);
    const health = await waitFor(async () => {
      const figures = expectStatus(await owner.get('/overview'), 200);
      const row = figures.providers.find((x: any) => x.id === account.id);
      return row.handoffs_last_hour === 1 ? row : null;
    });
    assert.equal(health.failures_last_hour, 1);
    assert.match(health.last_error, /^429 /);
    // Rests from the throttled hand-off, which came after the send.
    assert.ok(Date.parse(health.throttled_until) > sentAt + 500_000, health.throttled_until);
  });
});
