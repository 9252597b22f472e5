/**
 * provider-a-api (Amazon SES API v2 SendEmail, Content.Raw, SigV4) and provider-a feedback (SES
 * event notifications through Amazon SNS), over real sockets: an in-process Postern with
 * delivery on, real HTTP to the SES emulator (which recomputes the SigV4 signature itself),
 * and real HTTP to the feedback endpoint with notifications signed by a certificate of our own
 * (read through `feedback.sns_certificate_dir`). Time is a ManualClock started at the real time
 * (certificates and SigV4 dates stay plausible); the scheduler polls on real timers.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import aws4 from 'aws4';
import { ManualClock } from '../../src/clock.js';
import type { ProviderAccount } from '../../src/contract/providerAccount.js';
import { addDkimKey } from '../../src/operator/dkim.js';
import { messageShow } from '../../src/operator/messages.js';
import { type AttachOptions, attachProvider } from '../../src/operator/providers.js';
import { suppressionList } from '../../src/operator/suppressions.js';
import type { DeliveryJob } from '../../src/providers/adapter.js';
import { SesApiAdapter } from '../../src/providers/ses/adapter.js';
import { eventsForMessage } from '../../src/store/events.js';
import { assertAccepted } from '../support/assertions.js';
import { providerFixture } from '../support/emulators/harness.js';
import {
  canonicalRequest,
  type SES_ERRORS,
  SesEmulator,
  SnsSigner,
  sigV4Signature,
} from '../support/emulators/ses.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { schedulerProbe } from '../support/probes.js';
import { postFeedback } from '../support/providerEmulator.js';
import { storedMimeOf } from '../support/storedMime.js';
import { HANG_GUARD_MS, scope, waitFor } from '../support/waiting.js';

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

// AWS's documented example credentials (IAM user guide).
const CREDS = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  region: 'us-west-2',
};
const DOC_MESSAGE_ID = 'EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000';
const fixture = (name: string) => providerFixture('a', name);

type Scope = ReturnType<typeof scope>;

interface World {
  p: TestPostern;
  clock: ManualClock;
  pk: ProjectWithKeys;
  signer: SnsSigner;
}

async function world(s: Scope, delivery: Record<string, unknown> = {}): Promise<World> {
  const clock = new ManualClock(Date.now());
  const signer = s.add(await SnsSigner.create(CREDS.region), (x) => x.close());
  const p = s.add(
    await startTestPostern({
      clock,
      config: {
        delivery: { enabled: true, poll_interval_ms: 20, retry_ladder_seconds: [1], ...delivery },
        feedback: { sns_certificate_dir: signer.dir },
      },
    }),
    (x) => x.close(),
  );
  const pk = await createProjectWithKeys(p.ctx, 'ses', 'pro', { provider: false });
  return { p, clock, pk, signer };
}

async function emulator(s: Scope, w: World, creds = CREDS): Promise<SesEmulator> {
  return s.add(await SesEmulator.start(creds, { now: () => w.clock.now() }), (e) => e.close());
}

async function attachSes(w: World, emu: SesEmulator, opts: Partial<AttachOptions> = {}) {
  return await attachProvider(w.p.ctx, w.pk.project.id, {
    slug: 'provider-a-api',
    endpoint: emu.url,
    region: CREDS.region,
    user: CREDS.accessKeyId,
    apiKey: CREDS.secretAccessKey,
    ...opts,
  });
}

async function send(w: World, overrides: Record<string, unknown> = {}): Promise<string> {
  const res = await post(w.p.production, '/v1/send', {
    key: w.pk.liveKey,
    json: validMessage(overrides),
  });
  assertAccepted(res, 'queued');
  return res.body.id as string;
}

const statusOf = async (w: World, id: string) => (await messageShow(w.p.ctx, id)).status;

async function waitStatus(w: World, id: string, status: string) {
  await waitFor(
    async () => (await statusOf(w, id)) === status,
    HANG_GUARD_MS,
    `${id} to be ${status} (is ${await statusOf(w, id)}; ${(await messageShow(w.p.ctx, id)).last_error})`,
  );
  return messageShow(w.p.ctx, id);
}

const attempts = async (w: World, id: string) =>
  (await messageShow(w.p.ctx, id)).attempts_log.map((a) => ({
    account: a.provider_account_id,
    outcome: a.outcome,
  }));
const eventTypes = async (w: World, id: string) =>
  (await eventsForMessage(w.p.ctx.store, id)).map((e) => e.type);
const events = async (w: World, id: string) =>
  (await eventsForMessage(w.p.ctx.store, id)).map((e) => ({
    type: e.type,
    data: JSON.parse(e.data),
  }));
const suppressed = async (w: World) =>
  (await suppressionList(w.p.ctx, w.pk.project.id)).suppressions
    .map((x) => `${x.email}:${x.reason}`)
    .sort();

/** A documented SES record with the example message id and recipient replaced by ours. */
function record(name: string, sesId: string, recipient = 'recipient@example.com'): string {
  return fixture(name)
    .replaceAll(DOC_MESSAGE_ID, sesId)
    .replaceAll('recipient@example.com', recipient);
}

/** Sends a message through one SES account and returns its ids once it is `sent`. */
async function sentMessage(
  w: World,
  emu: SesEmulator,
  to: string | string[] = 'recipient@example.com',
): Promise<{ id: string; sesId: string }> {
  const id = await send(w, { to });
  const shown = await waitStatus(w, id, 'sent');
  assert.equal(shown.provider_message_id, emu.accepted.at(-1)!.messageId);
  return { id, sesId: shown.provider_message_id! };
}

/* ------------------------------------------------------------------------------------------ */
/* SigV4                                                                                       */
/* ------------------------------------------------------------------------------------------ */

describe('SigV4 against the AWS Signature Version 4 test suite', () => {
  // aws-sig-v4-test-suite: credentials AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY,
  // 20150830T123600Z, us-east-1, service "service", host example.amazonaws.com.
  const suite = { secret: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', date: '20150830T123600Z' };
  const vectors = [
    {
      name: 'post-vanilla',
      method: 'POST',
      path: '/',
      query: '',
      signature: '5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b',
    },
    {
      name: 'get-vanilla',
      method: 'GET',
      path: '/',
      query: '',
      signature: '5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31',
    },
    {
      name: 'get-vanilla-query-order-key-case',
      method: 'GET',
      path: '/',
      query: 'Param2=value2&Param1=value1',
      signature: 'b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500',
    },
  ];

  test("the emulator's verifier and the adapter's signing library (aws4) both produce the published signatures", () => {
    for (const v of vectors) {
      const canonical = canonicalRequest({
        method: v.method,
        path: v.path,
        query: v.query,
        headers: { host: 'example.amazonaws.com', 'x-amz-date': suite.date },
        signedHeaders: ['host', 'x-amz-date'],
        payload: '',
      });
      assert.equal(
        sigV4Signature(suite.secret, suite.date, 'us-east-1', 'service', canonical),
        v.signature,
        `${v.name}: emulator`,
      );
      const signed = aws4.sign(
        {
          host: 'example.amazonaws.com',
          method: v.method,
          path: v.path + (v.query ? `?${v.query}` : ''),
          service: 'service',
          region: 'us-east-1',
          headers: { 'X-Amz-Date': suite.date },
        },
        { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: suite.secret },
      );
      assert.equal(
        signed.headers!.Authorization,
        `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=${v.signature}`,
        `${v.name}: aws4`,
      );
    }
    // The documented canonical request of post-vanilla.
    assert.equal(
      canonicalRequest({
        method: 'POST',
        path: '/',
        query: '',
        headers: { host: 'example.amazonaws.com', 'x-amz-date': suite.date },
        signedHeaders: ['host', 'x-amz-date'],
        payload: '',
      }),
      'POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Sending                                                                                     */
/* ------------------------------------------------------------------------------------------ */

describe('provider-a-api: SES SendEmail', () => {
  test('the request is the documented SendEmail (golden fixture): Raw MIME with our DKIM signature, envelope split, tags, configuration set; the MessageId is captured', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const emu = await emulator(s, w);
    const account = await attachSes(w, emu);
    await addDkimKey(w.p.ctx, w.pk.project.id, { domain: 'example.com', selector: 's1' });

    const id = await send(w, {
      from: 'Sender <sender@example.com>',
      to: 'Recipient <recipient@example.com>',
      cc: 'cc@example.com',
      bcc: 'hidden@example.net',
      reply_to: 'replies@example.com',
      subject: 'Golden',
      text: 'Plain text',
      html: '<p>HTML</p>',
      headers: { 'X-Custom': 'kept' },
      tags: ['welcome'],
      category: 'onboarding',
      // SES tags allow only [A-Za-z0-9_-]: the second pair cannot be carried and is left out.
      metadata: { campaign: 'spring-2026', note: 'has spaces' },
      attachments: [{ filename: 'a.txt', content: Buffer.from('attached').toString('base64') }],
      provider_options: { 'provider-a-api': { configuration_set: 'ConfigSet' } },
    });
    const shown = await waitStatus(w, id, 'sent');

    assert.equal(emu.requests.length, 1);
    const req = emu.requests[0];
    const golden = JSON.parse(fixture('send-email.request.json'));
    assert.equal(req.method, golden.method);
    assert.equal(req.url, golden.path);
    const amzDate = String(req.headers['x-amz-date']);
    assert.equal(amzDate, new Date(w.clock.now()).toISOString().replace(/[:-]|\.\d{3}/g, ''));
    const signature = /Signature=([0-9a-f]{64})$/.exec(String(req.headers.authorization))![1];
    const fill = (v: string) =>
      v
        .replace('{date}', amzDate.slice(0, 8))
        .replace('{amz-date}', amzDate)
        .replace('{signature}', signature);
    for (const [name, value] of Object.entries(golden.headers as Record<string, string>))
      assert.equal(req.headers[name], fill(value), name);
    assert.equal(req.headers['content-length'], String(req.body.length));

    // The body, byte for byte once the raw data is set aside; the raw data is the stored MIME
    // with the DKIM-Signature in front.
    const body = JSON.parse(req.body.toString('utf8'));
    const raw = Buffer.from(body.Content.Raw.Data, 'base64');
    body.Content.Raw.Data = '{raw-base64}';
    assert.equal(JSON.stringify(body), JSON.stringify(golden.body));
    const stored = await storedMimeOf(w.p.ctx.store, w.p.stateDir, shown.id);
    assert.ok(
      raw.subarray(raw.length - stored.length).equals(stored),
      'Raw.Data ends with the stored MIME, unchanged',
    );
    const prepended = raw.subarray(0, raw.length - stored.length).toString('latin1');
    assert.match(
      prepended,
      /^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=example\.com;(\r\n [^\r\n]*)*\r\n$/,
    );
    assert.match(prepended, /[; ]s=s1;/);
    assert.doesNotMatch(
      raw.toString('latin1').split('\r\n\r\n')[0],
      /hidden@example\.net/,
      'Bcc is only in the Destination',
    );

    // The SES MessageId is what the message, the attempt and the event carry.
    const sesId = emu.accepted[0].messageId;
    assert.match(sesId, /^[0-9a-f]{16}-[0-9a-f-]{36}-000000$/);
    assert.equal(shown.provider, 'provider-a-api');
    assert.equal(shown.provider_message_id, sesId);
    assert.deepEqual(
      shown.attempts_log.map((a) => [
        a.provider_account_id,
        a.outcome,
        a.provider_message_id,
        a.reply,
      ]),
      [[account.id, 'sent', sesId, `200 MessageId ${sesId}`]],
    );
    const sent = (await events(w, id)).find((e) => e.type === 'mail.sent')!;
    assert.equal(sent.data.provider_message_id, sesId);
  });

  test('each SES error is classified per the SES v2 SendEmail reference (temporary with a rest, account, permanent)', async (t) => {
    const s = scope(t);
    const clock = new ManualClock(Date.now());
    // The emulator keeps real time; our clock is moved once to show an expired signature.
    const emu = s.add(await SesEmulator.start(CREDS), (e) => e.close());
    const dir = mkdtempSync(path.join(tmpdir(), 'postern-ses-'));
    s.add(dir, (d) => rmSync(d, { recursive: true, force: true }));
    const mimePath = path.join(dir, 'm.eml');
    writeFileSync(
      mimePath,
      'From: Sender <sender@example.com>\r\nTo: rcpt@example.org\r\nSubject: x\r\n\r\nbody\r\n',
    );
    const adapter = new SesApiAdapter({ clock, timeoutMs: 5000 });
    const job: DeliveryJob = {
      messageId: 'm.test',
      mimePath,
      mime: null,
      prependHeaders: '',
      envelope: { from: 'sender@example.com', to: ['rcpt@example.org'] },
      providerOptions: null,
      recipients: { to: ['rcpt@example.org'], cc: [], bcc: [] },
      tags: [],
      metadata: {},
      category: null,
    };
    const account = (
      over: {
        settings?: Partial<ProviderAccount['settings']>;
        secrets?: Partial<ProviderAccount['secrets']>;
      } = {},
    ): ProviderAccount => ({
      id: 'pa.test',
      project_id: 'p.test',
      slug: 'provider-a-api',
      settings: {
        host: null,
        port: null,
        tls: null,
        endpoint: emu.url,
        region: CREDS.region,
        user: CREDS.accessKeyId,
        ...over.settings,
      },
      secrets: { api_key: CREDS.secretAccessKey, ...over.secrets },
      priority: 1,
      free_quota: null,
      created_at: 0,
      detached_at: null,
    });

    const expected: Record<keyof typeof SES_ERRORS, [string, number | undefined]> = {
      TooManyRequestsException: ['temporary', 1000],
      LimitExceededException: ['temporary', 600_000],
      InternalFailure: ['temporary', undefined],
      ServiceUnavailable: ['temporary', undefined],
      AccountSuspendedException: ['account', undefined],
      SendingPausedException: ['account', undefined],
      MailFromDomainNotVerifiedException: ['account', undefined],
      MessageRejectedUnverified: ['account', undefined],
      MessageRejected: ['permanent', undefined],
      BadRequestException: ['permanent', undefined],
    };
    for (const [code, [kind, rest]] of Object.entries(expected)) {
      emu.fail(code as keyof typeof SES_ERRORS);
      const r = await adapter.send(job, account());
      assert.equal(r.kind, kind, `${code}: ${r.reply}`);
      assert.equal('retryAfterMs' in r ? r.retryAfterMs : undefined, rest, code);
      assert.match(r.reply, new RegExp(`^\\d{3} ${code.replace('Unverified', '')}: `), code);
    }

    // Credentials and configuration, as the emulator checks them.
    const wrongSecret = await adapter.send(
      job,
      account({ secrets: { api_key: 'not-the-secret' } }),
    );
    assert.equal(wrongSecret.kind, 'account');
    assert.match(
      wrongSecret.reply,
      /^403 InvalidSignatureException: The request signature we calculated does not match/,
    );
    const unknownKey = await adapter.send(
      job,
      account({ settings: { user: 'AKIAUNKNOWNEXAMPLE00' } }),
    );
    assert.equal(unknownKey.kind, 'account');
    assert.match(
      unknownKey.reply,
      /^403 UnrecognizedClientException: The security token included in the request is invalid/,
    );
    const wrongRegion = await adapter.send(job, account({ settings: { region: 'eu-west-1' } }));
    assert.equal(wrongRegion.kind, 'account');
    assert.match(
      wrongRegion.reply,
      /^403 InvalidSignatureException: Credential should be scoped to a valid region/,
    );
    const noSet = await adapter.send(
      { ...job, providerOptions: { 'provider-a-api': { configuration_set: 'Missing' } } },
      account(),
    );
    assert.equal(noSet.kind, 'account');
    assert.match(noSet.reply, /^404 NotFoundException: Configuration set <Missing> does not exist/);
    clock.advance(20 * 60 * 1000); // our clock 20 minutes ahead of SES's: the signature has expired
    const skewed = await adapter.send(job, account());
    assert.equal(skewed.kind, 'account');
    assert.match(skewed.reply, /Signature expired/);
    clock.advance(-20 * 60 * 1000);
    const noKey = await adapter.send(job, account({ settings: { user: null } }));
    assert.equal(noKey.kind, 'account');

    // And the success answer.
    const ok = await adapter.send(job, account());
    assert.equal(ok.kind, 'sent');
    assert.equal(ok.kind === 'sent' && ok.providerMessageId, emu.accepted.at(-1)!.messageId);
    assert.deepEqual(emu.accepted.at(-1)!.body.Destination, {
      ToAddresses: ['rcpt@example.org'],
      CcAddresses: [],
      BccAddresses: [],
    });
    // The unreachable endpoint is a temporary failure.
    const port = new URL(emu.url).port;
    await emu.close();
    const down = await adapter.send(job, account());
    assert.equal(down.kind, 'temporary');
    assert.match(down.reply, new RegExp(`127\\.0\\.0\\.1:${port}: ECONNREFUSED`));
    await adapter.close();
  });

  test('throttled (429 TooManyRequestsException): the next account takes it at once; the throttled one rests a second, then is used again', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const a = await emulator(s, w);
    const b = await emulator(s, w);
    const accA = await attachSes(w, a, { priority: '1' });
    const accB = await attachSes(w, b, { priority: '2' });
    a.behave('throttle');

    const first = await send(w);
    const shown = await waitStatus(w, first, 'sent');
    assert.deepEqual(await attempts(w, first), [
      { account: accA.id, outcome: 'temporary' },
      { account: accB.id, outcome: 'sent' },
    ]);
    assert.match(
      shown.attempts_log[0].reply ?? '',
      /^429 TooManyRequestsException: Maximum sending rate exceeded/,
    );
    assert.equal(shown.provider_message_id, b.accepted[0].messageId);

    // Within the rest, A is not even asked.
    const second = await send(w);
    await waitStatus(w, second, 'sent');
    assert.equal(a.requests.length, 1);
    assert.deepEqual(await attempts(w, second), [{ account: accB.id, outcome: 'sent' }]);

    // After it, A is first again.
    w.clock.advance(1000);
    const third = await send(w);
    await waitStatus(w, third, 'sent');
    assert.deepEqual(await attempts(w, third), [{ account: accA.id, outcome: 'sent' }]);
  });

  test('sending quota exceeded (LimitExceededException) with one account: the retry waits out the rest, then succeeds', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const looked = await schedulerProbe(s, w.p);
    const a = await emulator(s, w);
    await attachSes(w, a);
    a.fail('LimitExceededException');

    const id = await send(w);
    await waitFor(
      async () => (await attempts(w, id)).length === 1 && (await statusOf(w, id)) === 'queued',
      HANG_GUARD_MS,
      'the first attempt',
    );
    const shown = await messageShow(w.p.ctx, id);
    const finished = Date.parse(shown.attempts_log[0].finished_at);
    // The ladder says 1 s; the quota rest (10 min, per SES's guidance) wins.
    assert.equal(Date.parse(shown.next_attempt_at!), finished + 600_000);
    assert.match(shown.last_error!, /LimitExceededException: Daily message quota exceeded/);
    w.clock.advance(599_000);
    await looked();
    assert.equal(a.requests.length, 1);
    assert.equal(await statusOf(w, id), 'queued');
    w.clock.advance(1000);
    await waitStatus(w, id, 'sent');
    assert.equal(a.requests.length, 2);
  });

  test('5xx (InternalFailure): the next account takes it; with one account it is retried on the ladder', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const a = await emulator(s, w);
    const b = await emulator(s, w);
    const accA = await attachSes(w, a, { priority: '1' });
    const accB = await attachSes(w, b, { priority: '2' });
    a.behave('server_error');
    const id = await send(w);
    await waitStatus(w, id, 'sent');
    assert.deepEqual(await attempts(w, id), [
      { account: accA.id, outcome: 'temporary' },
      { account: accB.id, outcome: 'sent' },
    ]);

    // Both failing: queued for the ladder's 1 s, then sent.
    a.behave('server_error');
    b.behave('server_error');
    const retried = await send(w);
    await waitFor(
      async () =>
        (await attempts(w, retried)).length === 2 && (await statusOf(w, retried)) === 'queued',
      HANG_GUARD_MS,
      'both attempts',
    );
    assert.match((await messageShow(w.p.ctx, retried)).last_error!, /InternalFailure/);
    w.clock.advance(1000);
    await waitStatus(w, retried, 'sent');
    assert.deepEqual(
      (await attempts(w, retried)).map((x) => x.outcome),
      ['temporary', 'temporary', 'sent'],
    );
  });

  test('a bad secret (403 InvalidSignatureException) or a suspended account: the next account takes it', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const a = await emulator(s, w);
    const b = await emulator(s, w);
    const badKey = await attachSes(w, a, { priority: '1', apiKey: 'wrong-secret' });
    const accB = await attachSes(w, b, { priority: '2' });
    const id = await send(w);
    const shown = await waitStatus(w, id, 'sent');
    assert.deepEqual(await attempts(w, id), [
      { account: badKey.id, outcome: 'account' },
      { account: accB.id, outcome: 'sent' },
    ]);
    assert.match(shown.attempts_log[0].reply ?? '', /^403 InvalidSignatureException/);
    assert.equal(a.accepted.length, 0);

    const c = await emulator(s, w);
    const suspended = await attachSes(w, c, { priority: '0' });
    c.behave('suspended');
    const id2 = await send(w);
    const shown2 = await waitStatus(w, id2, 'sent');
    assert.deepEqual((await attempts(w, id2))[0], { account: suspended.id, outcome: 'account' });
    assert.equal((await attempts(w, id2)).at(-1)!.account, accB.id);
    assert.match(shown2.attempts_log[0].reply ?? '', /^400 AccountSuspendedException/);
  });

  test('MessageRejected: the message fails, no other account is tried', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const a = await emulator(s, w);
    const b = await emulator(s, w);
    const accA = await attachSes(w, a, { priority: '1' });
    await attachSes(w, b, { priority: '2' });
    a.behave('reject');
    const id = await send(w);
    const shown = await waitStatus(w, id, 'failed');
    assert.deepEqual(await attempts(w, id), [{ account: accA.id, outcome: 'permanent' }]);
    assert.equal(b.requests.length, 0);
    assert.match(shown.last_error!, /^400 MessageRejected/);
    assert.deepEqual(await eventTypes(w, id), ['mail.accepted', 'mail.failed']);
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Feedback                                                                                    */
/* ------------------------------------------------------------------------------------------ */

describe('provider-a feedback: SES notifications through SNS', () => {
  test('documented SES records, signed as SNS signs them, become the normalized events and suppressions', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const emu = await emulator(s, w);
    const account = await attachSes(w, emu);
    const postSns = async (name: string, sesId: string, rcpt: string, version: '1' | '2' = '1') => {
      const n = w.signer.notification(record(name, sesId, rcpt), {
        timestamp: new Date(w.clock.now()),
        version,
      });
      return postFeedback(w.p.production, account.id, n.body, n.headers);
    };

    // Delivery → mail.delivered.
    const delivered = await sentMessage(w, emu, 'ann@example.org');
    let res = await postSns('event-delivery.json', delivered.sesId, 'ann@example.org');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.equal(await statusOf(w, delivered.id), 'delivered');
    const ev = (await events(w, delivered.id)).find((e) => e.type === 'mail.delivered')!;
    assert.equal(ev.data.delivery.recipient, 'ann@example.org');
    assert.equal(ev.data.delivery.provider_message_id, delivered.sesId);
    assert.equal(ev.data.delivery.reply, '250 2.6.0 Message received');

    // Permanent bounce → mail.bounced + suppression (hard_bounce); SignatureVersion 2 this time.
    const bounced = await sentMessage(w, emu, 'bob@example.org');
    res = await postSns('event-bounce.json', bounced.sesId, 'bob@example.org', '2');
    assert.equal(res.status, 200, res.text);
    assert.equal(await statusOf(w, bounced.id), 'bounced');
    const bounce = (await events(w, bounced.id)).find((e) => e.type === 'mail.bounced')!;
    assert.equal(bounce.data.bounce.type, 'hard');
    assert.equal(bounce.data.bounce.subtype, 'General');
    assert.equal(bounce.data.bounce.reply, 'smtp; 550 5.1.1 user unknown');

    // Transient bounce → recorded on the message only.
    const soft = await sentMessage(w, emu, 'cat@example.org');
    res = await postSns('event-bounce-transient.json', soft.sesId, 'cat@example.org');
    assert.equal(res.status, 200, res.text);
    assert.equal(await statusOf(w, soft.id), 'sent');
    assert.deepEqual((await messageShow(w.p.ctx, soft.id)).recipient_outcomes, [
      { email: 'cat@example.org', status: 'soft_bounced', reply: 'smtp; 452 4.2.2 mailbox full' },
    ]);
    assert.deepEqual(await eventTypes(w, soft.id), ['mail.accepted', 'mail.sent']);
    // A delivery delay is a soft bounce too.
    res = await postSns('event-delivery-delay.json', soft.sesId, 'cat@example.org');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(await eventTypes(w, soft.id), ['mail.accepted', 'mail.sent']);

    // Complaint → mail.complained + suppression (complaint).
    const complained = await sentMessage(w, emu, 'dan@example.org');
    res = await postSns('event-complaint.json', complained.sesId, 'dan@example.org');
    assert.equal(res.status, 200, res.text);
    assert.equal(await statusOf(w, complained.id), 'complained');
    assert.equal(
      (await events(w, complained.id)).find((e) => e.type === 'mail.complained')!.data.complaint
        .feedback_type,
      'abuse',
    );

    // Reject (SES refused to send it) → mail.failed.
    const rejected = await sentMessage(w, emu, 'eve@example.org');
    res = await postSns('event-reject.json', rejected.sesId, 'eve@example.org');
    assert.equal(res.status, 200, res.text);
    assert.equal(await statusOf(w, rejected.id), 'failed');
    const failure = (await events(w, rejected.id)).find((e) => e.type === 'mail.failed')!;
    assert.equal(failure.data.failure.reason, 'provider_rejected');
    assert.equal(failure.data.failure.message, 'Bad content');

    // Opens are acknowledged and ignored.
    res = await postSns('event-open.json', delivered.sesId, 'ann@example.org');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.received, 0);
    assert.match(res.body.note, /Open/);

    assert.deepEqual(await suppressed(w), [
      'bob@example.org:hard_bounce',
      'dan@example.org:complaint',
    ]);
  });

  test('the older identity-notification format (notificationType) is read too, and our Message-ID matches when the SES id does not', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const emu = await emulator(s, w);
    const account = await attachSes(w, emu);
    const postRecord = (recordText: string) => {
      const n = w.signer.notification(recordText, { timestamp: new Date(w.clock.now()) });
      return postFeedback(w.p.production, account.id, n.body, n.headers);
    };
    const m = await sentMessage(w, emu, ['jane@example.com', 'richard@example.com']);
    const docId = /"messageId":"([^"]+)"/;
    const withId = (name: string) => {
      const text = fixture(name);
      return text.replace(docId.exec(text)![1], m.sesId);
    };
    let res = await postRecord(withId('notification-delivery.json'));
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.applied, 1);
    res = await postRecord(withId('notification-complaint.json'));
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      (await messageShow(w.p.ctx, m.id)).recipient_outcomes.map((o) => `${o.email}:${o.status}`),
      ['jane@example.com:delivered', 'richard@example.com:complained'],
    );

    // A message handed off over provider-a-smtp: SES's id was never captured, but the record
    // carries the original Message-ID header, <m.…@example.com>.
    const other = await sentMessage(w, emu, 'jane@example.com');
    const bounce = JSON.parse(fixture('notification-bounce.json'));
    bounce.mail.messageId = '0000014a5b6c7d8e-11111111-2222-3333-4444-555555555555-000000';
    bounce.mail.headers.find((h: { name: string }) => h.name === 'Message-ID').value =
      `<${other.id}@example.com>`;
    res = await postRecord(JSON.stringify(bounce));
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.equal(await statusOf(w, other.id), 'bounced');
    assert.deepEqual(await suppressed(w), [
      'jane@example.com:hard_bounce',
      'richard@example.com:complaint',
    ]);
  });

  test('the same notification twice is refused as a replay; the same record re-published is applied once; an unknown id is acknowledged', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const emu = await emulator(s, w);
    const account = await attachSes(w, emu);
    const m = await sentMessage(w, emu);
    const n = w.signer.notification(record('event-bounce.json', m.sesId), {
      timestamp: new Date(w.clock.now()),
    });
    let res = await postFeedback(w.p.production, account.id, n.body, n.headers);
    assert.equal(res.status, 200, res.text);
    res = await postFeedback(w.p.production, account.id, n.body, n.headers);
    assert.equal(res.status, 406);
    assert.equal(res.body.error.code, 'feedback:replayed');
    // SES publishing the same bounce again (a new SNS message): no second event.
    const again = w.signer.notification(record('event-bounce.json', m.sesId), {
      timestamp: new Date(w.clock.now()),
    });
    res = await postFeedback(w.p.production, account.id, again.body, again.headers);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(await eventTypes(w, m.id), ['mail.accepted', 'mail.sent', 'mail.bounced']);

    const unknown = w.signer.notification(
      record('event-delivery.json', '0000014a5b6c7d8e-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee-000000'),
      { timestamp: new Date(w.clock.now()) },
    );
    res = await postFeedback(w.p.production, account.id, unknown.body, unknown.headers);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { received: 1, applied: 0, duplicates: 0, unknown: 1 });
  });

  test('bad signature, untrusted certificate URL, stale timestamp, mismatched headers, malformed body, missing URL secret: refused, nothing changed', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const emu = await emulator(s, w);
    const account = await attachSes(w, emu);
    const m = await sentMessage(w, emu);
    const rec = record('event-bounce.json', m.sesId);
    const now = () => new Date(w.clock.now());
    const refused = async (
      body: string,
      headers: Record<string, string>,
      status: number,
      code: string,
      token?: string,
    ) => {
      const res = await postFeedback(w.p.production, account.id, body, headers, token);
      assert.equal(res.status, status, res.text);
      assert.equal(res.body.error.code, code);
    };

    // The Message changed after signing.
    const n = w.signer.notification(rec, { timestamp: now() });
    const tampered = {
      ...n.envelope,
      Message: n.envelope.Message.replace('Permanent', 'Transient'),
    };
    await refused(JSON.stringify(tampered), n.headers, 401, 'feedback:unauthenticated');
    // Signed by someone else's key.
    const impostor = s.add(await SnsSigner.create(CREDS.region), (x) => x.close());
    const forged = impostor.notification(rec, { timestamp: now() });
    await refused(
      JSON.stringify({ ...forged.envelope, SigningCertURL: w.signer.certUrl }),
      forged.headers,
      401,
      'feedback:unauthenticated',
    );
    // The certificate URL is not an SNS one (or not https, or not .pem).
    for (const url of [
      `https://sns.example.com/${w.signer.certName}`,
      `http://sns.${CREDS.region}.amazonaws.com/${w.signer.certName}`,
      `https://sns.${CREDS.region}.amazonaws.com/cert.txt`,
      `https://sns.${CREDS.region}.amazonaws.com.evil.com/${w.signer.certName}`,
    ]) {
      await refused(
        JSON.stringify({ ...n.envelope, SigningCertURL: url }),
        n.headers,
        401,
        'feedback:unauthenticated',
      );
    }
    // Properly signed, but 10 minutes old (the window is 300 s).
    const old = w.signer.notification(rec, { timestamp: new Date(w.clock.now() - 600_000) });
    await refused(old.body, old.headers, 401, 'feedback:stale');
    // SNS's headers disagree with the signed body.
    await refused(
      n.body,
      { ...n.headers, 'x-amz-sns-topic-arn': 'arn:aws:sns:us-west-2:999999999999:other' },
      401,
      'feedback:unauthenticated',
    );
    // Not an SNS message.
    await refused('{"Type":', { 'content-type': 'text/plain' }, 400, 'feedback:malformed');
    await refused(JSON.stringify({ hello: 'world' }), {}, 400, 'feedback:malformed');

    assert.deepEqual(await eventTypes(w, m.id), ['mail.accepted', 'mail.sent']);
    assert.equal(await statusOf(w, m.id), 'sent');
    assert.deepEqual(await suppressed(w), []);

    // With a webhook secret, the subscription URL must carry it.
    const secured = await attachSes(w, emu, { webhookSecret: 's3cret-path-token' });
    const m2 = await send(w);
    await waitStatus(w, m2, 'sent');
    const n2 = w.signer.notification(
      record('event-delivery.json', (await messageShow(w.p.ctx, m2)).provider_message_id!),
      { timestamp: now() },
    );
    let res = await postFeedback(w.p.production, secured.id, n2.body, n2.headers);
    assert.equal(res.status, 401);
    res = await postFeedback(w.p.production, secured.id, n2.body, n2.headers, 'wrong-token');
    assert.equal(res.status, 401);
    res = await postFeedback(w.p.production, secured.id, n2.body, n2.headers, 's3cret-path-token');
    assert.equal(res.status, 200, res.text);
    assert.equal(await statusOf(w, m2), 'delivered');
    // The original, untampered notification still applies (none of the refusals used it up).
    res = await postFeedback(w.p.production, account.id, n.body, n.headers);
    assert.equal(res.status, 200, res.text);
    assert.equal(await statusOf(w, m.id), 'bounced');
  });

  test('SubscriptionConfirmation is confirmed by a GET of SubscribeURL only after the signature verifies and only on an SNS (or the account endpoint) host', async (t) => {
    const s = scope(t);
    const w = await world(s);
    const emu = await emulator(s, w);
    const account = await attachSes(w, emu);
    const elsewhere = await emulator(s, w);

    const c = w.signer.subscriptionConfirmation(emu.url, { timestamp: new Date(w.clock.now()) });
    // Tampered: not confirmed.
    let res = await postFeedback(
      w.p.production,
      account.id,
      JSON.stringify({ ...c.envelope, Token: 'x' }),
      c.headers,
    );
    assert.equal(res.status, 401);
    assert.equal(emu.confirmations.length, 0);
    // Signed, on a host that is neither SNS nor the account's endpoint: not visited.
    const foreign = w.signer.subscriptionConfirmation(elsewhere.url, {
      timestamp: new Date(w.clock.now()),
    });
    res = await postFeedback(w.p.production, account.id, foreign.body, foreign.headers);
    assert.equal(res.status, 401);
    assert.equal(elsewhere.confirmations.length, 0);
    // Signed and on the account's endpoint host: confirmed.
    res = await postFeedback(w.p.production, account.id, c.body, c.headers);
    assert.equal(res.status, 200, res.text);
    assert.match(res.body.note, /confirmed/);
    assert.equal(emu.confirmations.length, 1);
    assert.equal(
      emu.confirmations[0],
      new URL(c.envelope.SubscribeURL!).pathname + new URL(c.envelope.SubscribeURL!).search,
    );

    // UnsubscribeConfirmation: acknowledged with a note.
    const u = w.signer.sign({
      ...c.envelope,
      Type: 'UnsubscribeConfirmation',
      MessageId: 'a9e4d1c2-1111-2222-3333-444455556666',
      Message: 'You have chosen to deactivate subscription.',
    });
    res = await postFeedback(w.p.production, account.id, JSON.stringify(u), {
      'x-amz-sns-message-type': 'UnsubscribeConfirmation',
    });
    assert.equal(res.status, 200, res.text);
    assert.match(res.body.note, /deleted/);
  });
});
