import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import nodemailer, { type SendMailOptions } from 'nodemailer';
import { generate } from 'selfsigned';
import type { OperatorContext } from '../../src/operator/context.js';
import { createKey, revokeKey } from '../../src/operator/keys.js';
import { attachProvider } from '../../src/operator/providers.js';
import { suppress } from '../../src/operator/suppressions.js';
import { getValue } from '../../src/store/queries.js';
import { plan, withPlans } from '../support/plans.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  type SpawnedPostern,
  spawnPostern,
  startTestPostern,
  type TestPostern,
  tempStateDir,
  validMessage,
} from '../support/postern.js';
import { withClosedIndex } from '../support/processes.js';
import {
  authedSession,
  dataPayload,
  plain,
  RawSmtp,
  rawMessage,
  rawSend,
} from '../support/rawSmtp.js';
import { storedMimeOf } from '../support/storedMime.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';

/* ------------------------------------------------------------------------------------------ */
/* Shared fixtures                                                                             */
/* ------------------------------------------------------------------------------------------ */

/** nodemailer's `info.response` for an accepted message; the id is an `m.` id like HTTP's. */
const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;

const cleanupDirs: string[] = [];
let sharedPair: Promise<{ cert: string; key: string }> | null = null;

/** One self-signed pair for every in-process server of this file (saves a key generation each). */
function sharedTls(): Promise<{ cert: string; key: string }> {
  sharedPair ??= (async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'postern-smtp-certs-'));
    cleanupDirs.push(dir);
    return writePair(dir, 'shared');
  })();
  return sharedPair;
}

async function writePair(dir: string, name: string): Promise<{ cert: string; key: string }> {
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keySize: 2048,
    algorithm: 'sha256',
  });
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  writeFileSync(cert, pems.cert);
  writeFileSync(key, pems.private);
  return { cert, key };
}

after(() => {
  for (const dir of cleanupDirs) rmSync(dir, { recursive: true, force: true });
});

/* ------------------------------------------------------------------------------------------ */
/* A raw SMTP client (test/support/rawSmtp.ts), for what a library client would not let us do */
/* ------------------------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------------------------ */
/* nodemailer                                                                                  */
/* ------------------------------------------------------------------------------------------ */

interface SendOutcome {
  /** The server's last reply: `info.response` on success, `err.response` on a refusal. */
  response: string;
  accepted: boolean;
  command?: string;
}

async function nodemailerSend(
  port: number,
  key: string | null,
  implicit: boolean,
  mail: SendMailOptions,
): Promise<SendOutcome> {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: implicit,
    requireTLS: !implicit,
    ...(key === null ? {} : { auth: { user: 'any-user', pass: key } }),
    tls: { rejectUnauthorized: false },
  });
  try {
    const info = await transport.sendMail(mail);
    return { response: info.response, accepted: true };
  } catch (err) {
    const e = err as { response?: string; command?: string; message: string };
    if (typeof e.response !== 'string') throw err;
    return { response: e.response, accepted: false, command: e.command };
  } finally {
    transport.close();
  }
}

/** Control headers exactly as written (nodemailer would otherwise RFC 2047-encode JSON). */
function control(
  headers: Record<string, string>,
): Record<string, { prepared: true; value: string }> {
  return Object.fromEntries(
    Object.entries(headers).map(([k, v]) => [k, { prepared: true as const, value: v }]),
  );
}

function queuedId(response: string): string {
  const m = QUEUED.exec(response);
  assert.ok(m, `expected "250 2.0.0 OK queued as m.…", got ${JSON.stringify(response)}`);
  return m[1];
}

/* ------------------------------------------------------------------------------------------ */
/* What an accepted message leaves behind                                                      */
/* ------------------------------------------------------------------------------------------ */

interface MessageRow {
  id: string;
  project_id: string;
  environment: string;
  source: string;
  status: string;
  hold_reason: string | null;
  from_email: string;
  recipients: string;
  subject: string;
  tags: string;
  metadata: string;
  category: string | null;
  routing: string;
  scheduled_at: number | null;
  spool_path: string;
  size_bytes: number;
  idempotency_key: string | null;
}

interface Expected {
  projectId: string;
  projectName: string;
  environment: 'production' | 'sandbox';
  status: string;
  holdReason?: string | null;
  from: string;
  recipients: { to: string[]; cc: string[]; bcc: string[] };
  subject: string;
  tags?: string[];
  metadata?: Record<string, string>;
  category?: string | null;
  routing?: { provider: string | string[] | null; strategy: string | null };
  scheduledAt?: number | null;
  idempotencyKey?: string | null;
  /** The client's own Message-ID, or null when the server had to add one. */
  messageId: string | null;
  /** Addresses that must appear nowhere in the stored headers (Bcc). */
  hidden?: string[];
  bodyIncludes?: string;
}

function rowOf(p: TestPostern, id: string): Promise<MessageRow | undefined> {
  return p.ctx.store.get<MessageRow>('SELECT * FROM messages WHERE id = ?', id);
}

/** The header block of a stored MIME file, unfolded. */
function headerBlock(mime: string): string {
  const end = mime.indexOf('\r\n\r\n');
  return (end < 0 ? mime : mime.slice(0, end)).replace(/\r\n[ \t]+/g, ' ');
}

/** The index row, the mail.accepted event and the spool file of one accepted SMTP message. */
async function assertStored(
  p: TestPostern,
  id: string,
  e: Expected,
): Promise<{ row: MessageRow; mime: string }> {
  const row = await rowOf(p, id);
  assert.ok(row, `a messages row for ${id}`);
  assert.deepEqual(
    {
      id: row.id,
      project_id: row.project_id,
      environment: row.environment,
      source: row.source,
      status: row.status,
      hold_reason: row.hold_reason,
      from_email: row.from_email,
      recipients: JSON.parse(row.recipients),
      subject: row.subject,
      tags: JSON.parse(row.tags),
      metadata: JSON.parse(row.metadata),
      category: row.category,
      routing: JSON.parse(row.routing),
      scheduled_at: row.scheduled_at,
      idempotency_key: row.idempotency_key,
    },
    {
      id,
      project_id: e.projectId,
      environment: e.environment,
      source: 'smtp',
      status: e.status,
      hold_reason: e.holdReason ?? null,
      from_email: e.from,
      recipients: e.recipients,
      subject: e.subject,
      tags: e.tags ?? [],
      metadata: e.metadata ?? {},
      category: e.category ?? null,
      routing: e.routing ?? { provider: null, strategy: null },
      scheduled_at: e.scheduledAt ?? null,
      idempotency_key: e.idempotencyKey ?? null,
    },
  );

  const events = await p.ctx.store.all<{ project_id: string; type: string; data: string }>(
    'SELECT * FROM events WHERE message_id = ? ORDER BY seq',
    id,
  );
  assert.deepEqual(
    events.map((ev) => ev.type),
    ['mail.accepted'],
  );
  assert.equal(events[0].project_id, e.projectId);
  const data = JSON.parse(events[0].data) as {
    mail: Record<string, unknown>;
    status: string;
    environment: string;
  };
  const { uid, subject, from, to, project, tags, metadata } = data.mail;
  assert.deepEqual(
    { uid, subject, from, to, project, tags, metadata },
    {
      uid: id,
      subject: e.subject,
      from: e.from,
      to: e.recipients.to,
      project: { uid: e.projectId, name: e.projectName },
      tags: e.tags ?? [],
      metadata: e.metadata ?? {},
    },
  );

  const stored = await storedMimeOf(p.ctx.store, p.stateDir, id);
  assert.equal(stored.length, row.size_bytes, 'size_bytes is the stored MIME size');
  const mime = stored.toString('utf8');
  const headers = headerBlock(mime);
  assert.doesNotMatch(headers, /^X-Service-/im, 'control headers are stripped');
  assert.doesNotMatch(headers, /^Bcc:/im, 'no Bcc header');
  for (const hidden of e.hidden ?? [])
    assert.ok(
      !headers.toLowerCase().includes(hidden.toLowerCase()),
      `${hidden} appears nowhere in the headers`,
    );
  const messageIds = headers.split('\r\n').filter((l) => /^Message-ID:/i.test(l));
  const expectedId =
    e.messageId ?? `<${id}@${e.from.slice(e.from.lastIndexOf('@') + 1).toLowerCase()}>`;
  assert.deepEqual(
    messageIds.map((l) => l.slice(l.indexOf(':') + 1).trim()),
    [expectedId],
    'exactly one Message-ID',
  );
  assert.match(
    headers,
    new RegExp(`^Subject: ${e.subject.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm'),
  );
  if (e.bodyIncludes) assert.ok(mime.includes(e.bodyIncludes), 'the body is stored');
  return { row, mime };
}

function spoolTmpEntries(p: TestPostern): string[] {
  return readdirSync(path.join(p.stateDir, 'spool', 'tmp'));
}

const countMessages = (p: TestPostern, projectId: string) =>
  getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages WHERE project_id = ?', projectId);

/* ------------------------------------------------------------------------------------------ */
/* The main in-process server                                                                  */
/* ------------------------------------------------------------------------------------------ */

describe('SMTP door', () => {
  let p: TestPostern;
  let n = 0;
  const fresh = (planName = 'pro', opts: { provider?: boolean } = {}): Promise<ProjectWithKeys> =>
    createProjectWithKeys(p.ctx, `smtp project ${++n}`, planName, opts);

  before(async () => {
    p = await startTestPostern({
      smtp: true,
      config: {
        smtp: { max_message_bytes: 20000, tls: await sharedTls() },
        limits: { categories_per_project: 2 },
        ...withPlans({
          one: plan({ monthly_messages: 1 }),
          daily1: plan({ monthly_messages: 1000, daily_messages: 1 }),
        }),
      },
    });
  });
  after(async () => p.close());

  describe('nodemailer over real TLS', () => {
    test('production over STARTTLS: 250 with the id, a queued row, the mail.accepted event and the stored MIME without control headers or Bcc', async () => {
      const { project, liveKey } = await fresh();
      const res = await nodemailerSend(p.smtp.production.starttls, liveKey, false, {
        from: 'Sender Name <sender@example.com>',
        to: 'To One <to1@example.org>',
        cc: 'cc1@example.org',
        bcc: 'hidden@example.net',
        subject: 'Hello over STARTTLS',
        text: 'Plain body over STARTTLS',
        html: '<p>HTML body</p>',
        messageId: '<client-chosen-1@example.com>',
        headers: control({
          'X-Service-Tags': 'welcome, onboarding',
          'X-Service-Metadata': '{"user_id":"42","plan":"gold"}',
          'X-Service-Category': 'Welcome',
          'X-Service-Provider': 'smtp',
          'X-Service-Strategy': 'fallback',
        }),
      });
      assert.equal(res.accepted, true, res.response);
      const id = queuedId(res.response);
      await assertStored(p, id, {
        projectId: project.id,
        projectName: project.name,
        environment: 'production',
        status: 'queued',
        from: 'sender@example.com',
        recipients: {
          to: ['to1@example.org'],
          cc: ['cc1@example.org'],
          bcc: ['hidden@example.net'],
        },
        subject: 'Hello over STARTTLS',
        tags: ['welcome', 'onboarding'],
        metadata: { user_id: '42', plan: 'gold' },
        category: 'Welcome',
        routing: { provider: 'smtp', strategy: 'fallback' },
        messageId: '<client-chosen-1@example.com>',
        hidden: ['hidden@example.net'],
        bodyIncludes: 'Plain body over STARTTLS',
      });
    });

    test('production over implicit TLS: queued, recorded and stored the same way', async () => {
      const { project, liveKey } = await fresh();
      const res = await nodemailerSend(p.smtp.production.implicit, liveKey, true, {
        from: 'sender@example.com',
        to: ['a@example.org', 'b@example.org'],
        bcc: ['secret1@example.net', 'secret2@example.net'],
        subject: 'Hello over implicit TLS',
        text: 'Implicit TLS body',
        messageId: '<client-chosen-2@example.com>',
        headers: control({ 'X-Service-Tags': 'implicit', 'X-Service-Category': 'Receipts' }),
      });
      const id = queuedId(res.response);
      await assertStored(p, id, {
        projectId: project.id,
        projectName: project.name,
        environment: 'production',
        status: 'queued',
        from: 'sender@example.com',
        recipients: {
          to: ['a@example.org', 'b@example.org'],
          cc: [],
          bcc: ['secret1@example.net', 'secret2@example.net'],
        },
        subject: 'Hello over implicit TLS',
        tags: ['implicit'],
        category: 'Receipts',
        messageId: '<client-chosen-2@example.com>',
        hidden: ['secret1@example.net', 'secret2@example.net'],
        bodyIncludes: 'Implicit TLS body',
      });
    });

    test('sandbox over STARTTLS with the test key: captured', async () => {
      const { project, testKey } = await fresh();
      const res = await nodemailerSend(p.smtp.sandbox.starttls, testKey, false, {
        from: 'sender@example.com',
        to: 'rcpt@example.org',
        bcc: 'hidden@example.net',
        subject: 'Sandbox STARTTLS',
        text: 'Sandbox body',
        messageId: '<sandbox-1@example.com>',
        headers: control({ 'X-Service-Metadata': '{"env":"sandbox"}' }),
      });
      const id = queuedId(res.response);
      await assertStored(p, id, {
        projectId: project.id,
        projectName: project.name,
        environment: 'sandbox',
        status: 'captured',
        from: 'sender@example.com',
        recipients: { to: ['rcpt@example.org'], cc: [], bcc: ['hidden@example.net'] },
        subject: 'Sandbox STARTTLS',
        metadata: { env: 'sandbox' },
        messageId: '<sandbox-1@example.com>',
        hidden: ['hidden@example.net'],
        bodyIncludes: 'Sandbox body',
      });
    });

    test('sandbox over implicit TLS with the test key: captured', async () => {
      const { project, testKey } = await fresh();
      const res = await nodemailerSend(p.smtp.sandbox.implicit, testKey, true, {
        from: 'sender@example.com',
        to: 'rcpt@example.org',
        subject: 'Sandbox implicit',
        text: 'Sandbox implicit body',
        messageId: '<sandbox-2@example.com>',
        headers: control({ 'X-Service-Tags': 'sandbox' }),
      });
      const id = queuedId(res.response);
      await assertStored(p, id, {
        projectId: project.id,
        projectName: project.name,
        environment: 'sandbox',
        status: 'captured',
        from: 'sender@example.com',
        recipients: { to: ['rcpt@example.org'], cc: [], bcc: [] },
        subject: 'Sandbox implicit',
        tags: ['sandbox'],
        messageId: '<sandbox-2@example.com>',
        bodyIncludes: 'Sandbox implicit body',
      });
    });

    test('a raw message without Message-ID gets <id@from-domain>; its Bcc header and envelope-only recipient never reach the stored headers', async () => {
      const { project, liveKey } = await fresh();
      const raw = [
        'From: Raw Sender <raw@mail.example.com>',
        'To: visible@example.org',
        'Bcc: hidden@example.net',
        'Subject: No Message-ID here',
        'X-Service-Tags: raw',
        'MIME-Version: 1.0',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Raw body line',
        '',
      ].join('\r\n');
      const res = await nodemailerSend(p.smtp.production.starttls, liveKey, false, {
        envelope: {
          from: 'raw@mail.example.com',
          to: ['visible@example.org', 'hidden@example.net'],
        },
        raw,
      });
      const id = queuedId(res.response);
      await assertStored(p, id, {
        projectId: project.id,
        projectName: project.name,
        environment: 'production',
        status: 'queued',
        from: 'raw@mail.example.com',
        recipients: { to: ['visible@example.org'], cc: [], bcc: ['hidden@example.net'] },
        subject: 'No Message-ID here',
        tags: ['raw'],
        messageId: null,
        hidden: ['hidden@example.net'],
        bodyIncludes: 'Raw body line',
      });
    });

    test('control headers a client RFC 2047-encodes (nodemailer does so for JSON values) are decoded before they are judged', async () => {
      const { project, liveKey } = await fresh();
      // No `prepared`: nodemailer sends `X-Service-Metadata: =?UTF-8?Q?=7B=22user=5Fid=22...?=`.
      const res = await nodemailerSend(p.smtp.production.starttls, liveKey, false, {
        from: 'sender@example.com',
        to: 'rcpt@example.org',
        subject: 'Encoded control headers',
        text: 'body',
        messageId: '<encoded-1@example.com>',
        headers: { 'X-Service-Metadata': '{"user_id":"42"}', 'X-Service-Tags': 'plain' },
      });
      assert.equal(res.accepted, true, res.response);
      const id = queuedId(res.response);
      await assertStored(p, id, {
        projectId: project.id,
        projectName: project.name,
        environment: 'production',
        status: 'queued',
        from: 'sender@example.com',
        recipients: { to: ['rcpt@example.org'], cc: [], bcc: [] },
        subject: 'Encoded control headers',
        tags: ['plain'],
        metadata: { user_id: '42' },
        messageId: '<encoded-1@example.com>',
      });
    });
  });

  describe('control headers', () => {
    let seq = 0;
    /** Each message carries its own Message-ID, which the stored file must keep. */
    const send = async (
      key: string,
      headers: Record<string, string>,
      overrides: SendMailOptions = {},
    ) => {
      const messageId = `<control-${++seq}@example.com>`;
      const outcome = await nodemailerSend(p.smtp.production.starttls, key, false, {
        from: 'sender@example.com',
        to: 'rcpt@example.org',
        subject: 'Control headers',
        text: 'Control body',
        messageId,
        headers: control(headers),
        ...overrides,
      });
      return { ...outcome, messageId };
    };
    const base = (k: ProjectWithKeys, sent: { messageId: string }) => ({
      projectId: k.project.id,
      projectName: k.project.name,
      environment: 'production' as const,
      from: 'sender@example.com',
      recipients: { to: ['rcpt@example.org'], cc: [], bcc: [] },
      subject: 'Control headers',
      messageId: sent.messageId,
    });

    test('X-Service-Scheduled-At in the future: scheduled, scheduled_at recorded', async () => {
      const k = await fresh();
      const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + 3600_000)
        .toISOString()
        .replace('.000Z', 'Z');
      const sent = await send(k.liveKey, { 'X-Service-Scheduled-At': at });
      await assertStored(p, queuedId(sent.response), {
        ...base(k, sent),
        status: 'scheduled',
        scheduledAt: Date.parse(at),
      });
    });

    test('X-Service-Paused: true holds the message (paused, hold reason request); false is queued', async () => {
      const k = await fresh();
      const held = await send(k.liveKey, { 'X-Service-Paused': 'true' });
      await assertStored(p, queuedId(held.response), {
        ...base(k, held),
        status: 'paused',
        holdReason: 'request',
      });
      const notHeld = await send(k.liveKey, { 'X-Service-Paused': 'false' });
      await assertStored(p, queuedId(notHeld.response), { ...base(k, notHeld), status: 'queued' });
    });

    test('X-Service-Provider as a comma list and X-Service-Strategy are recorded as routing', async () => {
      const k = await fresh();
      await attachProvider(p.ctx, k.project.id, { slug: 'provider-b-api', apiKey: 'pb-secret' });
      const sent = await send(k.liveKey, {
        'X-Service-Provider': 'smtp, provider-b-api',
        'X-Service-Strategy': 'round-robin',
      });
      await assertStored(p, queuedId(sent.response), {
        ...base(k, sent),
        status: 'queued',
        routing: { provider: ['smtp', 'provider-b-api'], strategy: 'round-robin' },
      });
    });

    test('X-Service-Idempotency-Key: a repeat (even with another body) answers the same id and stores one message', async () => {
      const k = await fresh();
      const sent = await send(k.liveKey, { 'X-Service-Idempotency-Key': 'order-1234-confirm' });
      const first = queuedId(sent.response);
      const again = await send(
        k.liveKey,
        { 'X-Service-Idempotency-Key': 'order-1234-confirm' },
        { subject: 'A different subject' },
      );
      assert.equal(queuedId(again.response), first);
      await assertStored(p, first, {
        ...base(k, sent),
        status: 'queued',
        idempotencyKey: 'order-1234-confirm',
      });
      assert.equal(await countMessages(p, k.project.id), 1);
      assert.equal(
        await getValue<number>(
          p.ctx.store,
          "SELECT COUNT(*) FROM events WHERE project_id = ? AND type = 'mail.accepted'",
          k.project.id,
        ),
        1,
      );
      // The key is per project: another project's message with the same key is its own.
      const other = await fresh();
      const otherId = queuedId(
        (await send(other.liveKey, { 'X-Service-Idempotency-Key': 'order-1234-confirm' })).response,
      );
      assert.notEqual(otherId, first);
    });

    const now = () => Date.now();
    const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const invalid: {
      name: string;
      headers: () => Record<string, string>;
      code: string;
      http?: () => { json?: Record<string, unknown>; headers?: Record<string, string> };
      details?: string;
    }[] = [
      {
        name: 'a tag with a space',
        headers: () => ({ 'X-Service-Tags': 'ok, bad tag' }),
        code: 'tags:invalid_format',
        http: () => ({ json: { tags: ['ok', 'bad tag'] } }),
      },
      {
        name: 'eleven tags',
        headers: () => ({ 'X-Service-Tags': 'a,b,c,d,e,f,g,h,i,j,k' }),
        code: 'tags:too_many',
        http: () => ({ json: { tags: 'abcdefghijk'.split('') } }),
      },
      {
        name: 'a 65-character tag',
        headers: () => ({ 'X-Service-Tags': 't'.repeat(65) }),
        code: 'tags:too_long',
        http: () => ({ json: { tags: ['t'.repeat(65)] } }),
      },
      {
        name: 'metadata that is not JSON',
        headers: () => ({ 'X-Service-Metadata': '{"user_id": 42' }),
        code: 'metadata:invalid_format',
        details: '[metadata: metadata:invalid_format]',
      },
      {
        name: 'metadata with a number value',
        headers: () => ({ 'X-Service-Metadata': '{"user_id": 42}' }),
        code: 'metadata:invalid_value',
        http: () => ({ json: { metadata: { user_id: 42 } } }),
      },
      {
        name: 'metadata that is a JSON array',
        headers: () => ({ 'X-Service-Metadata': '["a"]' }),
        code: 'metadata:invalid_type',
        http: () => ({ json: { metadata: ['a'] } }),
      },
      {
        name: 'eleven metadata keys',
        headers: () => ({
          'X-Service-Metadata': JSON.stringify(
            Object.fromEntries('abcdefghijk'.split('').map((c) => [c, 'v'])),
          ),
        }),
        code: 'metadata:too_many_keys',
        http: () => ({
          json: { metadata: Object.fromEntries('abcdefghijk'.split('').map((c) => [c, 'v'])) },
        }),
      },
      {
        name: 'a category starting with punctuation',
        headers: () => ({ 'X-Service-Category': '!promo' }),
        code: 'category:invalid_format',
        http: () => ({ json: { category: '!promo' } }),
      },
      {
        name: 'a 65-character category',
        headers: () => ({ 'X-Service-Category': 'c'.repeat(65) }),
        code: 'category:too_long',
        http: () => ({ json: { category: 'c'.repeat(65) } }),
      },
      {
        name: 'scheduled_at that is not an instant',
        headers: () => ({ 'X-Service-Scheduled-At': 'tomorrow' }),
        code: 'scheduled_at:invalid',
        http: () => ({ json: { scheduled_at: 'tomorrow' } }),
      },
      {
        name: 'scheduled_at in the past',
        headers: () => ({ 'X-Service-Scheduled-At': iso(now() - 3600_000) }),
        code: 'scheduled_at:too_soon',
        details: '[scheduled_at: scheduled_at:too_soon]',
      },
      {
        name: 'scheduled_at beyond 72 hours',
        headers: () => ({ 'X-Service-Scheduled-At': iso(now() + 4 * 86_400_000) }),
        code: 'scheduled_at:too_far',
        details: '[scheduled_at: scheduled_at:too_far]',
      },
      {
        name: 'paused that is not true/false',
        headers: () => ({ 'X-Service-Paused': 'yes' }),
        code: 'paused:invalid_type',
        http: () => ({ json: { paused: 'yes' } }),
      },
      {
        name: 'an unknown provider slug',
        headers: () => ({ 'X-Service-Provider': 'provider-z-api' }),
        code: 'routing:invalid_provider',
        http: () => ({ json: { routing: { provider: 'provider-z-api', strategy: null } } }),
      },
      {
        name: 'a provider named twice',
        headers: () => ({ 'X-Service-Provider': 'smtp, smtp' }),
        code: 'routing:duplicate_provider',
        http: () => ({ json: { routing: { provider: ['smtp', 'smtp'], strategy: null } } }),
      },
      {
        name: 'an unknown strategy',
        headers: () => ({ 'X-Service-Strategy': 'fastest' }),
        code: 'routing:invalid_strategy',
        http: () => ({ json: { routing: { provider: null, strategy: 'fastest' } } }),
      },
      {
        name: 'an idempotency key too short',
        headers: () => ({ 'X-Service-Idempotency-Key': 'short' }),
        code: 'idempotency_key:invalid_length',
        http: () => ({ headers: { 'Idempotency-Key': 'short' } }),
      },
      {
        name: 'an idempotency key with bad characters',
        headers: () => ({ 'X-Service-Idempotency-Key': 'order#1234!confirm' }),
        code: 'idempotency_key:invalid',
        http: () => ({ headers: { 'Idempotency-Key': 'order#1234!confirm' } }),
      },
      {
        name: 'an unknown X-Service-Foo header',
        headers: () => ({ 'X-Service-Foo': 'bar' }),
        code: 'headers:reserved',
        http: () => ({ json: { headers: { 'X-Service-Foo': 'bar' } } }),
      },
    ];
    for (const c of invalid) {
      test(`${c.name}: 554 5.6.0 ${c.code}, with the HTTP door's code and details; nothing stored`, async () => {
        const k = await fresh();
        const res = await send(k.liveKey, c.headers());
        assert.equal(res.accepted, false, res.response);
        assert.ok(res.response.startsWith(`554 5.6.0 ${c.code}: `), res.response);
        if (c.http) {
          const { json, headers } = c.http();
          const httpRes = await post(p.production, '/v1/send', {
            key: k.liveKey,
            json: validMessage(json),
            headers,
          });
          assert.equal(httpRes.status, 422, httpRes.text);
          const err = httpRes.body.error as {
            code: string;
            message: string;
            details?: { field: string; code: string }[];
          };
          assert.equal(err.code, c.code);
          const details = err.details
            ? ` [${err.details.map((d) => `${d.field}: ${d.code}`).join('; ')}]`
            : '';
          assert.equal(res.response, `554 5.6.0 ${err.code}: ${err.message}${details}`);
        } else {
          assert.ok(res.response.endsWith(` ${c.details}`), res.response);
        }
        assert.equal(await countMessages(p, k.project.id), 0);
      });
    }
  });

  describe('reply mapping', () => {
    const sendMinimal = (
      port: number,
      key: string | null,
      implicit = false,
      overrides: SendMailOptions = {},
    ) =>
      nodemailerSend(port, key, implicit, {
        from: 'sender@example.com',
        to: 'rcpt@example.org',
        subject: 'Mapping',
        text: 'Mapping body',
        ...overrides,
      });

    const assert535 = (res: SendOutcome, code: string) => {
      assert.equal(res.accepted, false);
      assert.match(res.response, new RegExp(`^535 5\\.7\\.8 ${code}: \\S`), res.response);
    };

    test('535 5.7.8 invalid_api_key for a well-formed key nobody issued', async () => {
      assert535(
        await sendMinimal(p.smtp.production.starttls, `ps_live_${'A'.repeat(40)}`),
        'invalid_api_key',
      );
    });

    test('535 5.7.8 missing_api_key for a password that is not an API key', async () => {
      assert535(await sendMinimal(p.smtp.production.starttls, 'hunter2'), 'missing_api_key');
    });

    test('535 5.7.8 key_expired for an expired key', async () => {
      const { project } = await fresh();
      // Issued two hours ago, expired an hour ago.
      const past: OperatorContext = { ...p.ctx, clock: { now: () => Date.now() - 2 * 3600_000 } };
      const expired = await createKey(
        past,
        project.id,
        'live',
        new Date(Date.now() - 3600_000).toISOString(),
      );
      assert535(await sendMinimal(p.smtp.production.implicit, expired.key, true), 'key_expired');
    });

    test('535 5.7.8 mode_mismatch: a live key on a sandbox listener, a test key on a production one', async () => {
      const { liveKey, testKey } = await fresh();
      assert535(await sendMinimal(p.smtp.sandbox.starttls, liveKey), 'mode_mismatch');
      assert535(await sendMinimal(p.smtp.sandbox.implicit, liveKey, true), 'mode_mismatch');
      assert535(await sendMinimal(p.smtp.production.starttls, testKey), 'mode_mismatch');
    });

    test('535 5.7.8 invalid_api_key for a revoked key, and a key revoked mid-session stops at the next MAIL FROM', async () => {
      const { project } = await fresh();
      const revoked = await createKey(p.ctx, project.id, 'live');
      await revokeKey(p.ctx, revoked.id);
      assert535(await sendMinimal(p.smtp.production.starttls, revoked.key), 'invalid_api_key');

      const live = await createKey(p.ctx, project.id, 'live');
      const client = await authedSession(p.smtp.production.starttls, live.key);
      try {
        await revokeKey(p.ctx, live.id);
        assert.match(
          await client.command('MAIL FROM:<sender@example.com>'),
          /^535 5\.7\.8 invalid_api_key: /,
        );
      } finally {
        await client.quit();
      }
      assert.equal(await countMessages(p, project.id), 0);
    });

    test('AUTH LOGIN with the key as the password is accepted as well as PLAIN', async () => {
      const { project, liveKey } = await fresh();
      const { client } = await RawSmtp.connect(p.smtp.production.implicit, { implicit: true });
      try {
        await client.command('EHLO client.test');
        assert.match(await client.command('AUTH LOGIN'), /^334 /);
        assert.match(await client.command(Buffer.from('whoever').toString('base64')), /^334 /);
        assert.match(await client.command(Buffer.from(liveKey).toString('base64')), /^235 /);
        const reply = await rawSend(
          client,
          'sender@example.com',
          ['rcpt@example.org'],
          rawMessage({ headers: ['Message-ID: <login-1@example.com>'] }),
        );
        const id = queuedId(reply);
        assert.equal((await rowOf(p, id))?.project_id, project.id);
      } finally {
        await client.quit();
      }
    });

    test('530 5.7.0 for MAIL FROM without AUTH, even after STARTTLS', async () => {
      const { client } = await RawSmtp.connect(p.smtp.production.starttls);
      try {
        await client.command('EHLO client.test');
        await client.startTls();
        await client.command('EHLO client.test');
        assert.match(await client.command('MAIL FROM:<sender@example.com>'), /^530 5\.7\.0 /);
      } finally {
        await client.quit();
      }
      const unauthenticated = await sendMinimal(p.smtp.production.implicit, null, true);
      assert.match(unauthenticated.response, /^530 5\.7\.0 /);
    });

    test('451 4.3.0 daily_send_cap_exceeded with "Retry in N seconds" (N = seconds to 00:00 UTC)', async () => {
      const { project, liveKey } = await fresh('daily1');
      queuedId((await sendMinimal(p.smtp.production.starttls, liveKey)).response);
      const before = Date.now();
      const res = await sendMinimal(p.smtp.production.starttls, liveKey);
      const after = Date.now();
      const m = /^451 4\.3\.0 daily_send_cap_exceeded: .* Retry in (\d+) seconds\.$/.exec(
        res.response,
      );
      assert.ok(m, res.response);
      // The seconds to the next 00:00 UTC, as the server counted them while the test waited.
      const toMidnight = (at: number) => {
        const midnight = new Date(at);
        midnight.setUTCHours(24, 0, 0, 0);
        return (midnight.getTime() - at) / 1000;
      };
      assert.ok(
        Number(m[1]) >= Math.floor(toMidnight(after)) &&
          Number(m[1]) <= Math.ceil(toMidnight(before)),
        res.response,
      );
      assert.equal(await countMessages(p, project.id), 1);
      // The sandbox is not metered.
      const testKey = (await createKey(p.ctx, project.id, 'test')).key;
      queuedId((await sendMinimal(p.smtp.sandbox.starttls, testKey)).response);
    });

    test('552 5.2.2 monthly_quota_exceeded once a plan without overage has spent its month', async () => {
      const { project, liveKey } = await fresh('one');
      queuedId((await sendMinimal(p.smtp.production.starttls, liveKey)).response);
      const res = await sendMinimal(p.smtp.production.implicit, liveKey, true);
      assert.match(res.response, /^552 5\.2\.2 monthly_quota_exceeded: \S/);
      assert.equal(await countMessages(p, project.id), 1);
    });

    test('550 5.1.1 suppressed_recipient names the suppressed address', async () => {
      const { project, liveKey } = await fresh();
      await suppress(p.ctx, project.id, 'blocked@example.org');
      const res = await sendMinimal(p.smtp.production.starttls, liveKey, false, {
        to: ['ok@example.org'],
        cc: 'Blocked@Example.org',
      });
      assert.match(res.response, /^550 5\.1\.1 suppressed_recipient: /);
      assert.ok(res.response.includes('blocked@example.org'), res.response);
      assert.equal(await countMessages(p, project.id), 0);
    });

    test('553 5.1.3 sender_domain:limit_reached for a second sender domain on a one-domain plan', async () => {
      const { project, liveKey } = await fresh('free');
      queuedId(
        (await sendMinimal(p.smtp.production.starttls, liveKey, false, { from: 'a@first.example' }))
          .response,
      );
      queuedId(
        (await sendMinimal(p.smtp.production.starttls, liveKey, false, { from: 'b@first.example' }))
          .response,
      );
      const res = await sendMinimal(p.smtp.production.starttls, liveKey, false, {
        from: 'c@second.example',
      });
      assert.match(res.response, /^553 5\.1\.3 sender_domain:limit_reached: \S/);
      assert.equal(await countMessages(p, project.id), 2);
    });

    test('554 5.6.0 subject:required for a message without Subject', async () => {
      const { project, liveKey } = await fresh();
      const client = await authedSession(p.smtp.production.starttls, liveKey);
      try {
        const reply = await rawSend(
          client,
          'sender@example.com',
          ['rcpt@example.org'],
          rawMessage({ subject: null }),
        );
        assert.match(reply, /^554 5\.6\.0 subject:required: .*\[subject: subject:required\]$/);
      } finally {
        await client.quit();
      }
      assert.equal(await countMessages(p, project.id), 0);
    });

    test('554 5.6.0 body:required for a message with neither a text nor an html part', async () => {
      const { project, liveKey } = await fresh();
      const client = await authedSession(p.smtp.production.starttls, liveKey);
      try {
        const message = [
          'From: sender@example.com',
          'To: rcpt@example.org',
          'Subject: Only an attachment',
          'MIME-Version: 1.0',
          'Content-Type: application/octet-stream',
          'Content-Disposition: attachment; filename="data.bin"',
          'Content-Transfer-Encoding: base64',
          '',
          Buffer.from('binary data').toString('base64'),
          '',
        ].join('\r\n');
        const reply = await rawSend(client, 'sender@example.com', ['rcpt@example.org'], message);
        assert.match(reply, /^554 5\.6\.0 body:required: .*\[body: body:required\]$/);
      } finally {
        await client.quit();
      }
      assert.equal(await countMessages(p, project.id), 0);
    });

    test('554 5.6.0 no_providers_configured for a production project without providers (the sandbox still captures)', async () => {
      const { project, liveKey, testKey } = await fresh('pro', { provider: false });
      const res = await sendMinimal(p.smtp.production.starttls, liveKey);
      assert.match(res.response, /^554 5\.6\.0 no_providers_configured: \S/);
      assert.equal(await countMessages(p, project.id), 0);
      queuedId((await sendMinimal(p.smtp.sandbox.implicit, testKey, true)).response);
    });

    test('554 5.6.0 routing_provider_not_configured names the provider the project lacks', async () => {
      const { project, liveKey } = await fresh();
      const res = await sendMinimal(p.smtp.production.starttls, liveKey, false, {
        headers: control({ 'X-Service-Provider': 'provider-b-api' }),
      });
      assert.match(res.response, /^554 5\.6\.0 routing_provider_not_configured: /);
      assert.ok(
        res.response.includes('Not attached to this project: provider-b-api.'),
        res.response,
      );
      assert.equal(await countMessages(p, project.id), 0);
    });

    test('554 5.6.0 category:limit_reached for a third category when the cap is 2', async () => {
      const { project, liveKey } = await fresh();
      for (const category of ['Alpha', 'Beta', 'Alpha']) {
        queuedId(
          (
            await sendMinimal(p.smtp.production.starttls, liveKey, false, {
              headers: control({ 'X-Service-Category': category }),
            })
          ).response,
        );
      }
      const res = await sendMinimal(p.smtp.production.starttls, liveKey, false, {
        headers: control({ 'X-Service-Category': 'Gamma' }),
      });
      assert.match(res.response, /^554 5\.6\.0 category:limit_reached: \S/);
      assert.equal(await countMessages(p, project.id), 3);
    });

    test('452 4.5.3 for the 51st RCPT TO; the message then goes through with its 50 recipients', async () => {
      const { project, liveKey } = await fresh();
      const rcpts = Array.from({ length: 51 }, (_, i) => `r${i}@example.org`);
      const client = await authedSession(p.smtp.production.starttls, liveKey);
      try {
        assert.match(await client.command('MAIL FROM:<sender@example.com>'), /^250 /);
        for (const r of rcpts.slice(0, 50))
          assert.match(await client.command(`RCPT TO:<${r}>`), /^250 /);
        assert.match(await client.command(`RCPT TO:<${rcpts[50]}>`), /^452 4\.5\.3 /);
        assert.match(await client.command('DATA'), /^354 /);
        client.write(
          dataPayload(
            rawMessage({ to: 'r0@example.org', headers: ['Message-ID: <fifty@example.com>'] }),
          ),
        );
        const id = queuedId(await client.next());
        const recipients = JSON.parse((await rowOf(p, id))!.recipients) as {
          to: string[];
          cc: string[];
          bcc: string[];
        };
        assert.deepEqual(recipients, { to: ['r0@example.org'], cc: [], bcc: rcpts.slice(1, 50) });
      } finally {
        await client.quit();
      }
      assert.equal(await countMessages(p, project.id), 1);
    });

    test('552 5.3.4 at MAIL FROM for a declared SIZE over smtp.max_message_bytes (advertised as SIZE 20000)', async () => {
      const { project, liveKey } = await fresh();
      const client = await authedSession(p.smtp.production.starttls, liveKey);
      try {
        assert.match(await client.command('EHLO client.test'), /^250[- ]SIZE 20000$/m);
        assert.match(
          await client.command('MAIL FROM:<sender@example.com> SIZE=20001'),
          /^552 5\.3\.4 /,
        );
        queuedId(
          await rawSend(
            client,
            'sender@example.com',
            ['rcpt@example.org'],
            rawMessage({ headers: ['Message-ID: <after-size@example.com>'] }),
          ),
        );
      } finally {
        await client.quit();
      }
      assert.equal(await countMessages(p, project.id), 1);
    });

    test('552 5.3.4 after DATA for an undeclared message over smtp.max_message_bytes; nothing is kept and the session goes on', async () => {
      const { project, liveKey } = await fresh();
      const client = await authedSession(p.smtp.production.starttls, liveKey);
      try {
        const big = rawMessage({ body: 'x'.repeat(76).concat('\r\n').repeat(400) });
        assert.ok(big.length > 20000);
        assert.match(
          await rawSend(client, 'sender@example.com', ['rcpt@example.org'], big),
          /^552 5\.3\.4 /,
        );
        queuedId(
          await rawSend(
            client,
            'sender@example.com',
            ['rcpt@example.org'],
            rawMessage({ headers: ['Message-ID: <after-big@example.com>'] }),
          ),
        );
      } finally {
        await client.quit();
      }
      assert.equal(await countMessages(p, project.id), 1);
      assert.deepEqual(spoolTmpEntries(p), [], 'no temp file left behind');
    });
  });

  describe('TLS before AUTH', () => {
    test('on a STARTTLS port, EHLO before STARTTLS does not advertise AUTH', async () => {
      const { client, greeting } = await RawSmtp.connect(p.smtp.production.starttls);
      try {
        assert.match(greeting, /^220 /);
        const ehlo = await client.command('EHLO client.test');
        assert.match(ehlo, /^250[- ]STARTTLS$/m);
        assert.doesNotMatch(ehlo, /^250[- ]AUTH\b/m);
      } finally {
        await client.quit();
      }
    });

    test('AUTH PLAIN with a valid key before STARTTLS is refused (5xx, never 235); after STARTTLS AUTH is advertised and accepted', async () => {
      const { liveKey } = await fresh();
      const { client } = await RawSmtp.connect(p.smtp.production.starttls);
      try {
        await client.command('EHLO client.test');
        const refused = await client.command(`AUTH PLAIN ${plain(liveKey)}`);
        assert.match(refused, /^5\d\d /);
        assert.match(await client.command('AUTH LOGIN'), /^5\d\d /, 'AUTH LOGIN is refused too');
        assert.match(
          await client.command('MAIL FROM:<sender@example.com>'),
          /^530 5\.7\.0 /,
          'still not authenticated',
        );
        await client.startTls();
        const afterTls = await client.command('EHLO client.test');
        assert.match(afterTls, /^250[- ]AUTH PLAIN LOGIN$/m);
        for (const ext of [
          'PIPELINING',
          '8BITMIME',
          'SMTPUTF8',
          'ENHANCEDSTATUSCODES',
          'SIZE 20000',
        ])
          assert.match(afterTls, new RegExp(`^250[- ]${ext}$`, 'm'));
        assert.doesNotMatch(afterTls, /^250[- ]STARTTLS$/m);
        assert.match(await client.command(`AUTH PLAIN ${plain(liveKey)}`), /^235 /);
      } finally {
        await client.quit();
      }
    });
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Rate limits and repeated AUTH failures                                                      */
/* ------------------------------------------------------------------------------------------ */

describe('SMTP rate limits and AUTH failures', () => {
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({
      smtp: true,
      config: {
        smtp: {
          tls: await sharedTls(),
          auth_failures_before_delay: 1,
          auth_failures_before_disconnect: 3,
        },
        rate_limits: {
          window_seconds: 60,
          send_per_key: 2,
          batch_per_key: 2,
          unauthenticated_per_ip: 1000,
        },
      },
    });
  });
  after(async () => p.close());

  const message = (n: number) =>
    rawMessage({ headers: [`Message-ID: <rate-${n}-${Date.now()}@example.com>`] });

  test('451 4.3.0 rate_limited with "Retry in" on the 3rd message of one session, the wait said once', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'rate in session');
    const client = await authedSession(p.smtp.production.starttls, liveKey);
    try {
      queuedId(await rawSend(client, 'sender@example.com', ['rcpt@example.org'], message(1)));
      queuedId(await rawSend(client, 'sender@example.com', ['rcpt@example.org'], message(2)));
      const third = await client.command('MAIL FROM:<sender@example.com>');
      // It said "retry in 57 seconds. Retry in 57 seconds.".
      assert.match(
        third,
        /^451 4\.3\.0 rate_limited: Too many requests\. Retry in \d+ seconds?\.$/,
      );
    } finally {
      await client.quit();
    }
    assert.equal(await countMessages(p, project.id), 2);
  });

  test('451 4.3.0 rate_limited with "Retry in" on the 3rd message across sessions', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'rate across sessions');
    const send = () =>
      nodemailerSend(p.smtp.production.implicit, liveKey, true, {
        from: 'sender@example.com',
        to: 'rcpt@example.org',
        subject: 'Rate',
        text: 'Rate body',
      });
    queuedId((await send()).response);
    queuedId((await send()).response);
    const third = await send();
    assert.match(third.response, /^451 4\.3\.0 rate_limited: .*Retry in (\d+) seconds\.$/);
    assert.equal(await countMessages(p, project.id), 2);
  });

  test('repeated AUTH failures are each answered 535 (the 2nd after a delay), then the connection is dropped with 421', async () => {
    const { client } = await RawSmtp.connect(p.smtp.production.starttls);
    try {
      await client.command('EHLO client.test');
      await client.startTls();
      await client.command('EHLO client.test');
      const bad = plain(`ps_live_${'B'.repeat(40)}`);
      assert.match(await client.command(`AUTH PLAIN ${bad}`), /^535 5\.7\.8 invalid_api_key: /);
      assert.match(await client.command(`AUTH PLAIN ${bad}`), /^535 5\.7\.8 invalid_api_key: /);
      assert.match(await client.command(`AUTH PLAIN ${bad}`), /^535 5\.7\.8 invalid_api_key: /);
      assert.match(await client.next(), /^421 /);
      await client.closed;
    } finally {
      client.destroy();
    }
  });
});

describe('SMTP AUTH failures answered later and later (smtp.auth_failure_delay_ms)', () => {
  let p: TestPostern;
  before(async () => {
    // A delay no step of the test comes near: the answer is still held when the rest is done.
    p = await startTestPostern({
      smtp: true,
      config: {
        smtp: {
          tls: await sharedTls(),
          auth_failures_before_delay: 1,
          auth_failures_before_disconnect: 3,
          auth_failure_delay_ms: 600_000,
        },
      },
    });
  });
  after(async () => p.close());

  test('a failure past auth_failures_before_delay is answered only after its delay, while other sessions are served', async () => {
    const { liveKey } = await createProjectWithKeys(p.ctx, 'auth delay');
    const { client } = await RawSmtp.connect(p.smtp.production.starttls);
    try {
      await client.command('EHLO client.test');
      await client.startTls();
      await client.command('EHLO client.test');
      const bad = plain(`ps_live_${'B'.repeat(40)}`);
      assert.match(
        await client.command(`AUTH PLAIN ${bad}`),
        /^535 5\.7\.8 invalid_api_key: /,
        'the first failure is answered at once',
      );
      let answered = false;
      const second = client.command(`AUTH PLAIN ${bad}`).then(
        () => (answered = true),
        () => undefined,
      );
      // Meanwhile another session connects, authenticates, and sends a message.
      const other = await authedSession(p.smtp.production.starttls, liveKey);
      try {
        queuedId(await rawSend(other, 'sender@example.com', ['rcpt@example.org'], rawMessage()));
      } finally {
        await other.quit();
      }
      assert.equal(answered, false, 'the second failure is still waiting for its answer');
      client.destroy();
      await second;
    } finally {
      client.destroy();
    }
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Connection cap per IP                                                                       */
/* ------------------------------------------------------------------------------------------ */

describe('SMTP connections per IP', () => {
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({
      smtp: true,
      config: { smtp: { tls: await sharedTls(), max_clients_per_ip: 2 } },
    });
  });
  after(async () => p.close());

  test('the 3rd concurrent connection from one IP is greeted with 421; once one closes, a new one is served', async () => {
    const port = p.smtp.production.starttls;
    const a = await RawSmtp.connect(port);
    const b = await RawSmtp.connect(port);
    try {
      assert.match(a.greeting, /^220 /);
      assert.match(b.greeting, /^220 /);
      const c = await RawSmtp.connect(port);
      assert.match(c.greeting, /^421 /);
      await c.client.closed;
      await a.client.quit();
      // The server counts the closed session out as it notices: until then a new one is still refused.
      const greeting = await waitFor(
        async () => {
          const d = await RawSmtp.connect(port);
          if (d.greeting.startsWith('220')) {
            await d.client.quit();
            return d.greeting;
          }
          await d.client.closed;
          return null;
        },
        HANG_GUARD_MS,
        'a new session to be served',
      );
      assert.match(greeting, /^220 /);
    } finally {
      a.client.destroy();
      b.client.destroy();
    }
  });
});

describe('SMTP greeting delay (smtp.greeting_delay_ms)', () => {
  test('a client that talks before the greeting is refused with 421', async () => {
    // The longest delay there is (10 s), 50 times the client's wait below: it talks before the greeting.
    const p = await startTestPostern({
      smtp: true,
      config: { smtp: { tls: await sharedTls(), greeting_delay_ms: 10_000 } },
    });
    try {
      const early = net.connect(p.smtp.production.starttls, '127.0.0.1');
      let heard = '';
      early.on('data', (d: Buffer) => (heard += d.toString('latin1')));
      await new Promise<void>((resolve) => early.once('connect', () => resolve()));
      // Past smtp-server's own fixed 100 ms (a loaded machine only waits longer): the configured delay holds the greeting.
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(heard, '', 'no greeting yet');
      early.write('EHLO early.example\r\n');
      await new Promise<void>((resolve) => early.once('close', () => resolve()));
      assert.match(heard, /^421 .*You talk too soon/m);
      assert.doesNotMatch(heard, /^250/m);
    } finally {
      await p.close();
    }
  });

  test('a client that waits for the greeting is greeted with 220', async () => {
    const p = await startTestPostern({
      smtp: true,
      config: { smtp: { tls: await sharedTls(), greeting_delay_ms: 400 } },
    });
    try {
      const patient = await RawSmtp.connect(p.smtp.production.starttls);
      assert.match(patient.greeting, /^220 /);
      await patient.client.quit();
    } finally {
      await p.close();
    }
  });
});

describe('SMTP greeting without a delay (the default, smtp.greeting_delay_ms 0)', () => {
  test('a client that writes EHLO the moment it connects is greeted and answered, never told it talks too soon', async () => {
    const p = await startTestPostern({ smtp: true, config: { smtp: { tls: await sharedTls() } } });
    try {
      for (let i = 0; i < 5; i++) {
        const client = net.connect(p.smtp.production.starttls, '127.0.0.1');
        let heard = '';
        client.on('data', (d: Buffer) => (heard += d.toString('latin1')));
        client.once('connect', () => client.write('EHLO eager.example\r\n'));
        await waitFor(
          () => /^250 /m.test(heard) || /^421 /m.test(heard) || client.destroyed,
          HANG_GUARD_MS,
          'a reply to EHLO',
        );
        client.destroy();
        assert.match(heard, /^220 /);
        assert.match(heard, /^250[ -]/m);
        assert.doesNotMatch(heard, /too soon/);
      }
    } finally {
      await p.close();
    }
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Graceful shutdown                                                                           */
/* ------------------------------------------------------------------------------------------ */

describe('SMTP graceful shutdown', () => {
  test('close() during DATA: the message in flight completes with 250 and is stored; new connections are refused', async () => {
    const stateDir = tempStateDir();
    cleanupDirs.push(stateDir);
    const p = await startTestPostern({
      smtp: true,
      stateDir,
      config: { smtp: { tls: await sharedTls(), shutdown_grace_ms: 10_000 } },
    });
    let closing: Promise<void> | null = null;
    let id: string;
    const port = p.smtp.production.starttls;
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'shutdown');
    const client = await authedSession(port, liveKey);
    try {
      assert.match(await client.command('MAIL FROM:<sender@example.com>'), /^250 /);
      assert.match(await client.command('RCPT TO:<rcpt@example.org>'), /^250 /);
      assert.match(await client.command('DATA'), /^354 /);
      const payload = dataPayload(
        rawMessage({
          subject: 'In flight at shutdown',
          headers: ['Message-ID: <in-flight@example.com>'],
          body: 'line of body\r\n'.repeat(200),
        }),
      );
      const chunks = payload.match(/[\s\S]{1,700}/g)!;
      client.write(chunks[0]);
      await new Promise((r) => setTimeout(r, 50));
      closing = p.close();
      await new Promise((r) => setTimeout(r, 50));
      // A new session is refused while the old one finishes.
      const refused = await RawSmtp.connect(port).then(
        async ({ client: c, greeting }) => {
          c.destroy();
          return greeting;
        },
        (err: NodeJS.ErrnoException) => err.code ?? String(err),
      );
      assert.match(refused, /^(ECONNREFUSED|421 )/);
      for (const chunk of chunks.slice(1)) {
        client.write(chunk);
        await new Promise((r) => setTimeout(r, 20));
      }
      id = queuedId(await client.next());
    } finally {
      await client.quit();
      await (closing ?? p.close());
    }
    // Reopened: the message is there, row and MIME.
    await withClosedIndex(stateDir, async ({ store }) => {
      const row = await store.get<{ project_id: string; subject: string; spool_path: string }>(
        'SELECT project_id, subject, spool_path FROM messages WHERE id = ?',
        id,
      );
      assert.deepEqual(
        { project_id: row?.project_id, subject: row?.subject },
        { project_id: project.id, subject: 'In flight at shutdown' },
      );
      assert.ok(
        (await storedMimeOf(store, stateDir, id)).toString('utf8').includes('line of body'),
      );
    });
  });
});

/* ------------------------------------------------------------------------------------------ */
/* The real process: every listener of the default config, SIGHUP certificate reload           */
/* ------------------------------------------------------------------------------------------ */

describe('spawned server, default config', () => {
  let server: SpawnedPostern;
  let stateDir: string;
  before(async () => {
    stateDir = tempStateDir();
    cleanupDirs.push(stateDir);
    server = await spawnPostern(stateDir);
  });
  after(async () => {
    await server.stop();
  });

  test('open-relay probe on every SMTP listener: MAIL FROM without AUTH is 530 5.7.0, before and after STARTTLS', async () => {
    const smtp = server.listeners.filter((l) => l.protocol === 'smtp');
    assert.equal(smtp.length, 14);
    assert.deepEqual(
      smtp.map((l) => l.url.split(':')[0]).sort(),
      [...Array(10).fill('smtp'), ...Array(4).fill('smtps')].sort(),
    );
    await Promise.all(
      smtp.map(async (l) => {
        const implicit = l.url.startsWith('smtps://');
        const { client, greeting } = await RawSmtp.connect(l.port, { host: l.host, implicit });
        try {
          assert.match(greeting, /^220 /, l.name);
          assert.match(await client.command('EHLO relay.test'), /^250/, l.name);
          if (!implicit) {
            assert.match(
              await client.command('MAIL FROM:<a@example.com>'),
              /^530 5\.7\.0 /,
              `${l.name} in plain text`,
            );
            await client.startTls();
            assert.match(await client.command('EHLO relay.test'), /^250/, l.name);
          }
          assert.match(await client.command('MAIL FROM:<a@example.com>'), /^530 5\.7\.0 /, l.name);
          const rcpt = await client.command('RCPT TO:<victim@example.net>');
          assert.match(rcpt, /^5\d\d /, `${l.name}: no RCPT without a sender`);
        } finally {
          await client.quit();
        }
      }),
    );
  });
});

describe('spawned server, SIGHUP', () => {
  test('SIGHUP reloads the certificate and key: new connections see the new certificate, an open session keeps working', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'postern-sighup-'));
    cleanupDirs.push(dir);
    const stateDir = path.join(dir, 'state');
    const certDir = path.join(dir, 'certs');
    mkdirSync(certDir);
    const first = await writePair(certDir, 'pair1');
    const configFile = path.join(dir, 'postern.json');
    const certPath = path.join(certDir, 'server.crt');
    const keyPath = path.join(certDir, 'server.key');
    writeFileSync(certPath, readFileSync(first.cert));
    writeFileSync(keyPath, readFileSync(first.key));
    writeFileSync(configFile, JSON.stringify({ smtp: { tls: { cert: certPath, key: keyPath } } }));
    const server = await spawnPostern(stateDir, {}, ['--config', configFile]);
    const implicitListener = server.listeners.find(
      (l) => l.url.startsWith('smtps://') && l.environment === 'production',
    )!;
    const port = implicitListener.port;

    // A project in the child's state, made through the same store the CLI uses.
    const { liveKey } = await withClosedIndex(stateDir, (ctx) =>
      createProjectWithKeys(ctx, 'sighup'),
    );
    const fingerprintOf = async () => {
      const { client, greeting } = await RawSmtp.connect(port, { implicit: true });
      assert.match(greeting, /^220 /);
      const fp = client.fingerprint();
      await client.quit();
      return fp;
    };
    const open = await authedSession(port, liveKey, true);
    try {
      const oldFingerprint = await fingerprintOf();
      assert.equal(oldFingerprint, new X509Certificate(readFileSync(first.cert)).fingerprint256);
      assert.equal(open.fingerprint(), oldFingerprint);

      const second = await writePair(certDir, 'pair2');
      writeFileSync(certPath, readFileSync(second.cert));
      writeFileSync(keyPath, readFileSync(second.key));
      server.child.kill('SIGHUP');
      let afterReload = oldFingerprint;
      for (let i = 0; i < 40 && afterReload === oldFingerprint; i++) {
        await new Promise((r) => setTimeout(r, 50));
        afterReload = await fingerprintOf();
      }
      assert.notEqual(afterReload, oldFingerprint, 'new connections get the new certificate');
      assert.equal(afterReload, new X509Certificate(readFileSync(second.cert)).fingerprint256);

      // The session opened before the reload still works on its old certificate.
      assert.equal(open.fingerprint(), oldFingerprint);
      const reply = await rawSend(
        open,
        'sender@example.com',
        ['rcpt@example.org'],
        rawMessage({ subject: 'Across SIGHUP', headers: ['Message-ID: <sighup@example.com>'] }),
      );
      const id = queuedId(reply);
      const subject = await withClosedIndex(stateDir, ({ store }) =>
        getValue<string>(store, 'SELECT subject FROM messages WHERE id = ?', id),
      );
      assert.equal(subject, 'Across SIGHUP');
    } finally {
      await open.quit();
      assert.equal(await server.stop(), 0, server.stderr());
    }
  });
});
