/**
 * Messages in the console API: search with every filter and cursor pagination, the detail with
 * its timeline, content, raw MIME and attachments, release / cancel / retry / delete, bulk
 * actions by ids and by filter, live updates — for an owner and for a member (whose view of
 * other projects is "not found"). Real server, real HTTP, real SMTP.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getMessage, insertMessage, type NewMessageRow } from '../../src/store/messages.js';
import { getValue } from '../../src/store/queries.js';
import {
  ConsoleClient,
  consoleWorld,
  EventStream,
  expectError,
  expectStatus,
  operatorAccount,
  PASSWORD,
} from '../support/console.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { authedSession, dataPayload } from '../support/rawSmtp.js';
import { Sink } from '../support/relaySink.js';
import { storedMimeOf } from '../support/storedMime.js';
import { storeBodySizesIn } from '../support/storeReads.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';

const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

async function send(
  base: string,
  key: string,
  overrides: Record<string, unknown> = {},
): Promise<{ id: string; status: string }> {
  const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
  assert.equal(res.status, 202, res.text);
  return res.body;
}

/** Puts a queued message on the retry ladder, as a failed hand-off would (delivery is off in these suites). */
async function waiting(p: TestPostern, id: string, dueInMs = 3600_000): Promise<void> {
  await p.ctx.store.run(
    'UPDATE messages SET next_attempt_at = ?, attempts = 1 WHERE id = ?',
    Date.now() + dueInMs,
    id,
  );
}

describe('console messages', () => {
  let p: TestPostern;
  let a: ProjectWithKeys;
  let b: ProjectWithKeys;
  let owner: ConsoleClient;
  let member: ConsoleClient;
  const ids: Record<string, string> = {};

  before(async () => {
    ({ p, a, b, owner, member } = await consoleWorld());
    ids.captured = (
      await send(p.sandbox, a.testKey, {
        subject: 'Sandbox hello',
        to: 'Ann <ann@example.org>',
        tags: ['welcome'],
      })
    ).id;
    ids.queued = (
      await send(p.production, a.liveKey, {
        subject: 'Invoice 42',
        category: 'billing',
        from: 'Billing <billing@shop.example>',
      })
    ).id;
    ids.paused = (
      await send(p.production, a.liveKey, {
        subject: 'Held',
        paused: true,
        cc: 'carol@example.org',
      })
    ).id;
    ids.other = (await send(p.production, b.liveKey, { subject: 'Project B mail' })).id;
  });
  after(async () => p?.close());

  test('the list is newest first, for an owner across projects; a member sees only their projects', async () => {
    const all = expectStatus(await owner.get('/messages'), 200);
    assert.deepEqual(
      all.messages.map((m: any) => m.id),
      [ids.other, ids.paused, ids.queued, ids.captured],
    );
    assert.equal(all.next_cursor, null);
    const mine = expectStatus(await member.get('/messages'), 200);
    assert.deepEqual(
      mine.messages.map((m: any) => m.id),
      [ids.paused, ids.queued, ids.captured],
    );
    const sandbox = mine.messages.find((m: any) => m.id === ids.captured);
    assert.deepEqual(sandbox, {
      id: ids.captured,
      project_id: a.project.id,
      environment: 'sandbox',
      sandbox: true,
      source: 'http',
      status: 'captured',
      paused: false,
      from: 'sender@example.com',
      from_name: 'Sender',
      to: ['ann@example.org'],
      subject: 'Sandbox hello',
      category: null,
      tags: ['welcome'],
      scheduled_at: null,
      created_at: sandbox.created_at,
      attempts: 0,
      next_attempt_at: null,
      last_error: null,
    });
    assert.deepEqual([all.total, all.total_capped, mine.total], [4, false, 3]);
  });

  test('the list counts every message that matches (not only the page), says where a retrying one stands, takes several statuses at once, and From finds display names', async () => {
    const page = expectStatus(await owner.get('/messages?limit=1'), 200);
    assert.deepEqual([page.messages.length, page.total, page.total_capped], [1, 4, false]);
    const next = expectStatus(await owner.get(`/messages?limit=1&cursor=${page.next_cursor}`), 200);
    assert.equal(next.total, 4, "the count is the filter's, whatever the page");
    assert.equal(
      expectStatus(await owner.get('/messages?status=paused&status=captured'), 200).total,
      2,
    );
    assert.equal(
      expectStatus(
        await member.get(`/messages?project=${a.project.id}&environment=production`),
        200,
      ).total,
      2,
    );
    // A failed attempt puts a queued message on the retry ladder: the list says how often and why.
    await p.ctx.store.run(
      "UPDATE messages SET attempts = 3, next_attempt_at = ?, last_error = 'smtp: 451 4.3.0 try again later' WHERE id = ?",
      Date.parse('2031-01-01T00:00:00Z'),
      ids.queued,
    );
    try {
      const row = expectStatus(await owner.get(`/messages?id=${ids.queued}`), 200).messages[0];
      assert.deepEqual(
        [row.status, row.attempts, row.next_attempt_at, row.last_error],
        ['queued', 3, '2031-01-01T00:00:00.000Z', 'smtp: 451 4.3.0 try again later'],
      );
    } finally {
      await p.ctx.store.run(
        'UPDATE messages SET attempts = 0, next_attempt_at = ?, last_error = NULL WHERE id = ?',
        Date.now(),
        ids.queued,
      );
    }
    // From: the display name ("Billing"), any case, as well as the address.
    const byName = expectStatus(await owner.get('/messages?from=billing'), 200).messages;
    assert.deepEqual(
      byName.map((m: any) => [m.id, m.from, m.from_name]),
      [[ids.queued, 'billing@shop.example', 'Billing']],
    );
    const named = await send(p.production, a.liveKey, {
      subject: 'From a name',
      from: { email: 'noreply@mail.example', name: 'Acme Support' },
    });
    try {
      assert.deepEqual(
        expectStatus(await owner.get('/messages?from=acme%20sup'), 200).messages.map(
          (m: any) => m.id,
        ),
        [named.id],
      );
      assert.equal(expectStatus(await owner.get('/messages?from=acme%20sup'), 200).total, 1);
    } finally {
      // Gone again: the other tests count this world's four messages.
      await p.ctx.store.run('DELETE FROM messages WHERE id = ?', named.id);
      await p.ctx.store.run('DELETE FROM message_bodies WHERE message_id = ?', named.id);
      if (p.ctx.store.dialect === 'postgres')
        await p.ctx.store.run('DELETE FROM message_body_chunks WHERE message_id = ?', named.id);
    }
  });

  test('the count stops at 10,000 ("more than"), however many match', async () => {
    const big = await createProjectWithKeys(p.ctx, 'counted');
    const now = Date.now();
    await p.ctx.store.transaction(async (tx) => {
      for (let i = 0; i < 10_002; i++) {
        await insertMessage(tx, {
          id: `m.0yyyyyyyy${String(i).padStart(17, '0')}`,
          project_id: big.project.id,
          environment: 'production',
          source: 'http',
          status: 'cancelled',
          hold_reason: null,
          from_email: 'count@example.com',
          recipients: JSON.stringify({ to: ['x@example.org'], cc: [], bcc: [] }),
          subject: 'counted',
          tags: '[]',
          metadata: '{}',
          category: null,
          routing: '{}',
          provider_options: null,
          scheduled_at: null,
          spool_path: 'none.eml',
          size_bytes: 100,
          idempotency_key: null,
          created_at: now,
          updated_at: now,
          next_attempt_at: null,
        });
      }
    });
    try {
      const counted = expectStatus(
        await owner.get(`/messages?project=${big.project.id}&limit=2`),
        200,
      );
      assert.deepEqual(
        [counted.messages.length, counted.total, counted.total_capped],
        [2, 10_000, true],
      );
      const one = expectStatus(
        await owner.get(
          `/messages?project=${big.project.id}&id=m.0yyyyyyyy${String(5).padStart(17, '0')}`,
        ),
        200,
      );
      assert.deepEqual([one.total, one.total_capped], [1, false]);
    } finally {
      // Gone again: the other tests count this world's four messages.
      await p.ctx.store.run('DELETE FROM messages WHERE project_id = ?', big.project.id);
    }
  });

  test('every filter narrows: project, environment, status, from, to, subject, category, tag, created range, id', async () => {
    const found = async (query: string, client = owner) =>
      expectStatus(await client.get(`/messages?${query}`), 200).messages.map((m: any) => m.id);
    assert.deepEqual(await found(`project=${b.project.id}`), [ids.other]);
    assert.deepEqual(await found('environment=sandbox'), [ids.captured]);
    assert.deepEqual(await found('status=paused&status=captured'), [ids.paused, ids.captured]);
    assert.deepEqual(await found('from=SHOP.example'), [ids.queued]);
    assert.deepEqual(await found('to=carol@'), [ids.paused]);
    assert.deepEqual(await found('subject=invoice'), [ids.queued]);
    assert.deepEqual(await found('category=billing'), [ids.queued]);
    assert.deepEqual(await found('tag=welcome'), [ids.captured]);
    assert.deepEqual(await found(`id=${ids.paused}`), [ids.paused]);
    // Substring filters are literal: % and _ match only themselves.
    assert.deepEqual(await found('subject=%25'), []);
    const queued = (await getMessage(p.ctx.store, ids.queued))!;
    assert.deepEqual(
      await found(
        `project=${a.project.id}&created_after=${new Date(queued.created_at).toISOString()}`,
      ),
      [ids.paused, ids.queued],
    );
    assert.deepEqual(
      await found(
        `project=${a.project.id}&created_before=${new Date(queued.created_at).toISOString()}`,
      ),
      [ids.captured],
    );
    assert.deepEqual(
      await found(`environment=production&status=queued&status=paused&project=${a.project.id}`),
      [ids.paused, ids.queued],
    );
  });

  test('pages follow next_cursor, newest first, without gaps or repeats; a cursor this list did not give is refused', async () => {
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const page: any = expectStatus(
        await owner.get(`/messages?limit=1${cursor ? `&cursor=${cursor}` : ''}`),
        200,
      );
      pages.push(page.messages.map((m: any) => m.id));
      cursor = page.next_cursor;
    } while (cursor !== null);
    assert.deepEqual(pages, [[ids.other], [ids.paused], [ids.queued], [ids.captured]]);
    assert.deepEqual(
      expectError(await owner.get('/messages?cursor=not!a!cursor'), 422, 'cursor:invalid_value')
        .details,
      [{ field: 'cursor', code: 'cursor:invalid_value' }],
    );
    expectError(await owner.get('/messages?status=lost'), 422, 'status:invalid_value');
  });

  test('a member asking for another project, or for any of its messages, gets 404, and nothing changes', async () => {
    expectError(await member.get(`/messages?project=${b.project.id}`), 404, 'not_found');
    for (const suffix of ['', '/content', '/raw', '/attachments/0'])
      expectError(
        await member.get(`/messages/${ids.other}${suffix}`, {
          unchecked: suffix === '/raw' || suffix.startsWith('/att'),
        }),
        404,
        'not_found',
      );
    for (const action of ['release', 'cancel', 'retry'])
      expectError(await member.post(`/messages/${ids.other}/${action}`), 404, 'not_found');
    expectError(await member.delete(`/messages/${ids.other}`), 404, 'not_found');
    assert.equal((await getMessage(p.ctx.store, ids.other))!.status, 'queued');
    // The same answer as for an id that does not exist at all.
    const unknown = await member.get('/messages/m.01nosuchmessage000000000000');
    const hidden = await member.get(`/messages/${ids.other}`);
    assert.deepEqual(
      [hidden.status, hidden.body.error.type, hidden.body.error.code],
      [unknown.status, unknown.body.error.type, unknown.body.error.code],
    );
  });

  test('a message shows its recipients and timeline; its content has headers, text, HTML and attachments; raw MIME and each attachment download', async () => {
    const { id } = await send(p.production, a.liveKey, {
      subject: 'With parts',
      to: 'ann@example.org',
      bcc: 'audit@example.org',
      text: 'plain words',
      html: '<p>rich <img src="cid:logo@example.com"></p>',
      attachments: [
        {
          filename: 'report.csv',
          content_type: 'text/csv',
          content: Buffer.from('a,b\n1,2\n').toString('base64'),
        },
        {
          filename: 'logo.png',
          content_type: 'image/png',
          disposition: 'inline',
          content_id: 'logo@example.com',
          content: PNG,
        },
      ],
    });
    const shown = expectStatus(await member.get(`/messages/${id}`), 200);
    assert.deepEqual(shown.recipients, [
      { email: 'ann@example.org', kind: 'to', status: 'queued', reply: null },
      { email: 'audit@example.org', kind: 'bcc', status: 'queued', reply: null },
    ]);
    assert.deepEqual(
      shown.timeline.map((e: any) => [e.kind, e.type]),
      [['event', 'mail.accepted']],
    );
    const content = expectStatus(await member.get(`/messages/${id}/content`), 200);
    assert.equal(content.text.trim(), 'plain words');
    assert.equal(content.html, '<p>rich <img src="cid:logo@example.com"></p>');
    assert.ok(
      content.headers.some((h: any) => h.name === 'Subject' && h.value === 'With parts'),
      JSON.stringify(content.headers),
    );
    assert.ok(!content.headers.some((h: any) => /^bcc$/i.test(h.name)));
    // In the order the stored MIME holds them: the inline image sits with the HTML, before the attachment.
    assert.deepEqual(content.attachments, [
      {
        index: 0,
        filename: 'logo.png',
        content_type: 'image/png',
        disposition: 'inline',
        content_id: 'logo@example.com',
        size: Buffer.from(PNG, 'base64').length,
      },
      {
        index: 1,
        filename: 'report.csv',
        content_type: 'text/csv',
        disposition: 'attachment',
        content_id: null,
        size: 8,
      },
    ]);

    const raw = await member.get(`/messages/${id}/raw`, { unchecked: true });
    assert.equal(raw.status, 200);
    assert.equal(raw.headers.get('content-type'), 'message/rfc822');
    assert.match(
      raw.headers.get('content-disposition')!,
      new RegExp(`^attachment; filename="${id.replace('.', '\\.')}\\.eml"`),
    );
    const stored = (await storedMimeOf(p.ctx.store, p.stateDir, id)).toString('utf8');
    assert.equal(raw.text, stored);

    const png = await fetch(`${p.console}/console/api/v1/messages/${id}/attachments/0`, {
      headers: { cookie: member.cookie! },
    });
    assert.equal(png.status, 200);
    assert.equal(png.headers.get('content-type'), 'image/png');
    assert.equal(png.headers.get('x-content-type-options'), 'nosniff');
    assert.match(png.headers.get('content-disposition')!, /^attachment; filename="logo\.png"/);
    assert.deepEqual(Buffer.from(await png.arrayBuffer()), Buffer.from(PNG, 'base64'));
    const csv = await member.get(`/messages/${id}/attachments/1`, { unchecked: true });
    assert.equal(csv.text, 'a,b\n1,2\n');
    expectError(
      await member.get(`/messages/${id}/attachments/2`, { unchecked: true }),
      404,
      'not_found',
    );
  });

  test("the preview points its cid: references at the message's own parts, with a token of their own: served without the session cookie, only for that message's inline parts, never with a forged or another message's token", async () => {
    const { id } = await send(p.production, a.liveKey, {
      subject: 'Inline parts',
      html: '<p><img id="logo" src="cid:logo@example.com"> <span style="background:url(\'cid:logo%40example.com\')">x</span> <img src="cid:unknown@example.com"></p>',
      attachments: [
        {
          filename: 'logo.png',
          content_type: 'image/png',
          disposition: 'inline',
          content_id: 'logo@example.com',
          content: PNG,
        },
        {
          filename: 'report.csv',
          content_type: 'text/csv',
          content: Buffer.from('a,b\n').toString('base64'),
        },
      ],
    });
    const preview = await member.get(`/messages/${id}/preview`, { unchecked: true });
    assert.equal(preview.status, 200);
    assert.match(preview.headers.get('content-security-policy')!, /img-src data: 'self'; /);
    const urls = [...preview.text.matchAll(/(?:src="|url\(')(inline\/\d+\?token=[^"']+)/g)].map(
      (m) => m[1],
    );
    assert.equal(urls.length, 2, preview.text);
    assert.equal(urls[0], urls[1], 'both references are the one part');
    assert.match(
      preview.text,
      /src="cid:unknown@example\.com"/,
      'a reference to no part of the message stays as it is',
    );
    const [, index, token] = /^inline\/(\d+)\?token=(.+)$/.exec(urls[0])!;
    assert.equal(index, '0');

    // No cookie: the preview frame's opaque origin sends none.
    const part = await fetch(`${p.console}/console/api/v1/messages/${id}/inline/0?token=${token}`);
    assert.equal(part.status, 200);
    assert.equal(part.headers.get('content-type'), 'image/png');
    assert.equal(part.headers.get('x-content-type-options'), 'nosniff');
    assert.match(part.headers.get('content-security-policy')!, /sandbox/);
    assert.deepEqual(Buffer.from(await part.arrayBuffer()), Buffer.from(PNG, 'base64'));
    const anonymous = new ConsoleClient(p.console);
    // An attachment without a Content-ID, another message, a forged token, a viewer link's token: all 404.
    expectError(
      await anonymous.get(`/messages/${id}/inline/1?token=${token}`, { unchecked: true }),
      404,
      'not_found',
    );
    expectError(
      await anonymous.get(`/messages/${ids.queued}/inline/0?token=${token}`, { unchecked: true }),
      404,
      'not_found',
    );
    expectError(
      await anonymous.get(`/messages/${id}/inline/0?token=${token.slice(0, -2)}xx`, {
        unchecked: true,
      }),
      404,
      'not_found',
    );
    const link = expectStatus(
      await member.post(`/messages/${id}/link`, { expires_in_seconds: 3600 }),
      201,
    );
    const viewerToken = link.url.split('/').pop();
    expectError(
      await anonymous.get(`/messages/${id}/inline/0?token=${viewerToken}`, { unchecked: true }),
      404,
      'not_found',
    );
    expectError(await anonymous.get(`/messages/${id}/inline/0`), 422, 'token:required');
  });

  test('release, cancel and retry apply the CLI rules; a state that does not allow the action is 409 and unchanged', async () => {
    const captured = (await send(p.sandbox, a.testKey, { subject: 'to release' })).id;
    const released = expectStatus(await member.post(`/messages/${captured}/release`), 200);
    assert.deepEqual([released.id, released.status, released.paused], [captured, 'queued', false]);
    const again = expectError(await member.post(`/messages/${captured}/release`), 409, 'conflict');
    assert.match(again.message, /is queued; only paused or captured messages can be released/);

    const held = (await send(p.production, a.liveKey, { subject: 'to cancel', paused: true })).id;
    assert.equal(
      expectStatus(await member.post(`/messages/${held}/cancel`), 200).status,
      'cancelled',
    );
    expectError(await member.post(`/messages/${held}/cancel`), 409, 'conflict');
    expectError(await member.post(`/messages/${held}/release`), 409, 'conflict');

    const retried = (await send(p.production, a.liveKey, { subject: 'to retry' })).id;
    await waiting(p, retried);
    assert.ok((await getMessage(p.ctx.store, retried))!.next_attempt_at! > Date.now());
    const before = Date.now();
    assert.equal(
      expectStatus(await member.post(`/messages/${retried}/retry`), 200).status,
      'queued',
    );
    const due = (await getMessage(p.ctx.store, retried))!.next_attempt_at!;
    assert.ok(due >= before && due <= Date.now(), `due at ${due}`);
    expectError(await member.post(`/messages/${ids.captured}/retry`), 409, 'conflict');
    assert.equal((await getMessage(p.ctx.store, ids.captured))!.status, 'captured');
  });

  test('a captured message can be deleted with its stored body (a spool file, or its body in the index or the database); any other is 409', async () => {
    // The bodies the store keeps: SQLite's small ones (message_bodies), every one on PostgreSQL (message_body_chunks).
    const bodyInStore = async (id: string) => (await storeBodySizesIn(p.ctx.store)).has(id);
    // Over spool.index_body_max_bytes: a spool file on SQLite; on PostgreSQL, rows like any body.
    const { id } = await send(p.sandbox, a.testKey, {
      subject: 'to delete',
      text: 'x'.repeat(70_000),
    });
    const file =
      p.ctx.store.dialect === 'sqlite'
        ? path.join(p.stateDir, 'spool', (await getMessage(p.ctx.store, id))!.spool_path)
        : null;
    const bodyKept = async () => (file ? existsSync(file) : bodyInStore(id));
    assert.ok(await bodyKept());
    expectError(await member.delete(`/messages/${ids.queued}`), 409, 'conflict');
    assert.deepEqual(expectStatus(await member.delete(`/messages/${id}`), 200), {
      id,
      deleted: true,
    });
    assert.equal(await getMessage(p.ctx.store, id), undefined);
    assert.equal(await bodyKept(), false);
    expectError(await member.get(`/messages/${id}`), 404, 'not_found');
    // A small one: its body goes with its row.
    const small = (await send(p.sandbox, a.testKey, { subject: 'small to delete' })).id;
    assert.equal(await bodyInStore(small), true);
    assert.deepEqual(expectStatus(await member.delete(`/messages/${small}`), 200), {
      id: small,
      deleted: true,
    });
    assert.equal(await bodyInStore(small), false);
  });

  test('bulk by ids acts on those in a state the action applies to and counts the rest; a member’s view stops at their projects', async () => {
    const one = (await send(p.sandbox, a.testKey, { subject: 'bulk one' })).id;
    const two = (await send(p.sandbox, a.testKey, { subject: 'bulk two' })).id;
    const result = expectStatus(
      await member.post('/messages/bulk', {
        action: 'release',
        ids: [one, two, ids.queued, ids.other, 'm.01nosuchmessage000000000000'],
      }),
      200,
    );
    assert.deepEqual(result, {
      action: 'release',
      matched: 2,
      changed: 2,
      skipped: 1,
      not_found: 2,
      changed_ids: result.changed_ids,
    });
    assert.deepEqual(new Set(result.changed_ids), new Set([one, two]));
    assert.equal((await getMessage(p.ctx.store, ids.other))!.status, 'queued');
    assert.deepEqual(
      await Promise.all([one, two].map(async (id) => (await getMessage(p.ctx.store, id))!.status)),
      ['queued', 'queued'],
    );
  });

  test('bulk retry by filter makes every waiting message of the filter due at once and leaves the rest', async () => {
    const waitingIds = [];
    for (let i = 0; i < 3; i++)
      waitingIds.push((await send(p.production, b.liveKey, { subject: `waiting ${i}` })).id);
    for (const id of waitingIds) await waiting(p, id);
    const dueAlready = (await send(p.production, b.liveKey, { subject: 'due already' })).id;
    const dueAt = (await getMessage(p.ctx.store, dueAlready))!.next_attempt_at;
    const result = expectStatus(
      await owner.post('/messages/bulk', { action: 'retry', filter: { project: b.project.id } }),
      200,
    );
    assert.deepEqual(result, { action: 'retry', matched: 3, changed: 3, skipped: 0, not_found: 0 });
    // Order, not duration: each was made due before the retry answered (they were waiting).
    const answeredAt = Date.now();
    for (const id of waitingIds)
      assert.ok((await getMessage(p.ctx.store, id))!.next_attempt_at! <= answeredAt);
    assert.equal((await getMessage(p.ctx.store, dueAlready))!.next_attempt_at, dueAt);
    // A member's filter cannot reach another project.
    expectError(
      await member.post('/messages/bulk', { action: 'cancel', filter: { project: b.project.id } }),
      404,
      'not_found',
    );
    const none = expectStatus(
      await member.post('/messages/bulk', { action: 'cancel', filter: { subject: 'waiting' } }),
      200,
    );
    assert.deepEqual(none, { action: 'cancel', matched: 0, changed: 0, skipped: 0, not_found: 0 });
  });

  test('a bulk dry run counts what the action would touch and changes nothing, writing no audit row', async () => {
    const held = [];
    for (let i = 0; i < 3; i++)
      held.push(
        (await send(p.production, a.liveKey, { subject: `dry run ${i}`, paused: true })).id,
      );
    const auditBefore = expectStatus(await owner.get('/audit?limit=500'), 200).entries.length;
    const byFilter = expectStatus(
      await member.post('/messages/bulk', {
        action: 'release',
        filter: { subject: 'dry run' },
        dry_run: true,
      }),
      200,
    );
    assert.deepEqual(byFilter, {
      action: 'release',
      matched: 3,
      changed: 0,
      skipped: 0,
      not_found: 0,
      dry_run: true,
    });
    const byIds = expectStatus(
      await member.post('/messages/bulk', {
        action: 'cancel',
        ids: [...held, ids.other, 'm.01nosuchmessage000000000000'],
        dry_run: true,
      }),
      200,
    );
    assert.deepEqual(byIds, {
      action: 'cancel',
      matched: 3,
      changed: 0,
      skipped: 0,
      not_found: 2,
      dry_run: true,
    });
    for (const id of held) assert.equal((await getMessage(p.ctx.store, id))!.status, 'paused');
    assert.equal(
      expectStatus(await owner.get('/audit?limit=500'), 200).entries.length,
      auditBefore,
    );
    const done = expectStatus(
      await member.post('/messages/bulk', { action: 'release', filter: { subject: 'dry run' } }),
      200,
    );
    assert.equal(done.changed, 3);
    assert.equal(done.dry_run, undefined);
  });

  test('a bulk request names ids or a filter, not both and not neither; more than 10,000 messages is refused and changes nothing', async () => {
    expectError(
      await owner.post('/messages/bulk', { action: 'cancel' }),
      422,
      'body:ids_or_filter',
    );
    expectError(
      await owner.post('/messages/bulk', { action: 'cancel', ids: [ids.queued], filter: {} }),
      422,
      'body:ids_or_filter',
    );
    expectError(
      await owner.post('/messages/bulk', { action: 'explode', ids: [ids.queued] }),
      422,
      'action:invalid_value',
    );
    const big = await createProjectWithKeys(p.ctx, 'big');
    const now = Date.now();
    const row = (i: number): NewMessageRow => ({
      id: `m.0zzzzzzzz${String(i).padStart(17, '0')}`,
      project_id: big.project.id,
      environment: 'production',
      source: 'http',
      status: 'paused',
      hold_reason: 'request',
      from_email: 'bulk@example.com',
      recipients: JSON.stringify({ to: ['x@example.org'], cc: [], bcc: [] }),
      subject: 'bulk',
      tags: '[]',
      metadata: '{}',
      category: null,
      routing: '{}',
      provider_options: null,
      scheduled_at: null,
      spool_path: 'none.eml',
      size_bytes: 100,
      idempotency_key: null,
      created_at: now,
      updated_at: now,
      next_attempt_at: null,
    });
    // In steps, timers let run between them: on SQLite one transaction of 10,001 inserts held this
    // process (the server's too) for seconds on a loaded machine, past both ends' keep-alive
    // timeouts, and the next request went out on a connection whose closing was overdue ("fetch failed").
    for (let from = 0; from < 10_001; from += 1000) {
      await p.ctx.store.transaction(async (tx) => {
        for (let i = from; i < Math.min(from + 1000, 10_001); i++) await insertMessage(tx, row(i));
      });
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    const refused = expectError(
      await owner.post('/messages/bulk', { action: 'cancel', filter: { project: big.project.id } }),
      422,
      'filter:too_many',
    );
    assert.deepEqual(refused.details, [{ field: 'filter', code: 'filter:too_many' }]);
    assert.equal(
      await getValue<number>(
        p.ctx.store,
        "SELECT COUNT(*) FROM messages WHERE project_id = ? AND status = 'cancelled'",
        big.project.id,
      ),
      0,
    );
    // Exactly the bound is fine.
    await p.ctx.store.run("UPDATE messages SET status = 'cancelled' WHERE id = ?", row(0).id);
    const done = expectStatus(
      await owner.post('/messages/bulk', {
        action: 'release',
        filter: { project: big.project.id },
      }),
      200,
    );
    assert.deepEqual(done, {
      action: 'release',
      matched: 10_000,
      changed: 10_000,
      skipped: 0,
      not_found: 0,
    });
  });

  test('every console message action is in the audit log with its operator and address', async () => {
    const log = expectStatus(await owner.get('/audit?limit=200'), 200).entries;
    const actions = new Set(log.map((e: any) => e.action));
    for (const a of [
      'message.release',
      'message.cancel',
      'message.retry',
      'message.delete',
      'message.bulk_release',
      'message.bulk_retry',
    ])
      assert.ok(actions.has(a), a);
    const release = log.find((e: any) => e.action === 'message.release');
    assert.equal(release.actor_email, 'member@example.com');
    assert.equal(release.client_ip, '127.0.0.1');
  });
});

describe('console live updates', () => {
  let p: TestPostern;
  let a: ProjectWithKeys;
  let b: ProjectWithKeys;
  let owner: ConsoleClient;
  let member: ConsoleClient;

  before(async () => {
    ({ p, a, b, owner, member } = await consoleWorld({
      config: { console: { events_poll_ms: 50 } },
    }));
  });
  after(async () => p?.close());

  test('new and changed messages are announced to the streams allowed to see them, as they happen', async () => {
    const memberStream = new EventStream(member);
    const sandboxOnly = new EventStream(owner, '?environment=sandbox');
    const ownerStream = new EventStream(owner);
    try {
      assert.deepEqual(
        await Promise.all([memberStream.opened, sandboxOnly.opened, ownerStream.opened]),
        [200, 200, 200],
      );
      const captured = (await send(p.sandbox, a.testKey, { subject: 'live' })).id;
      const other = (await send(p.production, b.liveKey, { subject: 'not for the member' })).id;
      const announced = await memberStream.next((e) => e.data.id === captured);
      assert.deepEqual(announced, {
        event: 'message',
        data: {
          id: captured,
          status: 'captured',
          project_id: a.project.id,
          environment: 'sandbox',
          type: 'mail.accepted',
        },
      });
      await ownerStream.next((e) => e.data.id === other);
      await owner.post(`/messages/${captured}/release`);
      assert.deepEqual((await memberStream.next((e) => e.data.type === 'message.release')).data, {
        id: captured,
        status: 'queued',
        project_id: a.project.id,
        environment: 'sandbox',
        type: 'message.release',
      });
      const bulk = (await send(p.sandbox, a.testKey, { subject: 'bulk' })).id;
      await memberStream.next((e) => e.data.id === bulk);
      await owner.post('/messages/bulk', { action: 'cancel', ids: [bulk] });
      assert.deepEqual((await memberStream.next((e) => e.event === 'refresh')).data, {
        reason: 'bulk',
        action: 'cancel',
        count: 1,
      });
      await ownerStream.next((e) => e.event === 'refresh');
      assert.ok(
        !memberStream.events.some((e) => e.data.id === other),
        JSON.stringify(memberStream.events),
      );
      assert.ok(
        !sandboxOnly.events.some((e) => e.data.id === other),
        JSON.stringify(sandboxOnly.events),
      );
      await sandboxOnly.next((e) => e.data.id === captured);
    } finally {
      memberStream.close();
      sandboxOnly.close();
      ownerStream.close();
    }
  });

  test('a stream needs a session or token; a member cannot open another project’s', async () => {
    assert.equal(await new EventStream(new ConsoleClient(p.console)).opened, 401);
    const s = new EventStream(member, `?project=${b.project.id}`);
    assert.equal(await s.opened, 404);
  });
});

describe('console message timeline', () => {
  test('a message sent over HTTP and one sent over SMTP show the same timeline shape', async (t) => {
    const sink = await Sink.start('relay');
    const p = await startTestPostern({
      console: true,
      smtp: true,
      config: { delivery: { enabled: true, poll_interval_ms: 30 } },
    });
    t.after(async () => {
      await p.close();
      await sink.close();
    });
    const pk = await createProjectWithKeys(p.ctx, 'timeline', 'pro', { provider: false });
    const { attachProvider } = await import('../../src/operator/providers.js');
    await attachProvider(p.ctx, pk.project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: String(sink.port),
      tls: 'none',
    });
    await operatorAccount(p.ctx, 'owner@example.com', 'owner');
    const owner = await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD);

    const overHttp = (await send(p.production, pk.liveKey, { subject: 'over http' })).id;
    const smtp = await authedSession(p.smtp.production.starttls, pk.liveKey);
    await smtp.command('MAIL FROM:<sender@example.com>');
    await smtp.command('RCPT TO:<rcpt@example.org>');
    assert.match(await smtp.command('DATA'), /^354/);
    smtp.write(
      dataPayload(
        'From: sender@example.com\r\nTo: rcpt@example.org\r\nSubject: over smtp\r\n\r\nHello there\r\n',
      ),
    );
    const queued = await smtp.next();
    const overSmtp = /queued as (m\.\S+)/.exec(queued)![1];
    smtp.destroy();
    for (const id of [overHttp, overSmtp])
      await waitFor(
        async () => (await getMessage(p.ctx.store, id))!.status === 'sent',
        HANG_GUARD_MS,
        `${id} sent`,
      );

    const shapes = [];
    for (const id of [overHttp, overSmtp]) {
      const shown = expectStatus(await owner.get(`/messages/${id}`), 200);
      shapes.push(
        shown.timeline.map((e: any) => ({
          kind: e.kind,
          what: e.kind === 'event' ? e.type : e.outcome,
          keys: Object.keys(e).sort(),
          detail: e.kind === 'event' ? Object.keys(e.detail).sort() : null,
        })),
      );
      const attempt = shown.timeline.find((e: any) => e.kind === 'attempt');
      assert.match(attempt.reply, /queued as relay-/);
      assert.equal(attempt.provider, 'smtp');
      assert.deepEqual(shown.recipients, [
        { email: 'rcpt@example.org', kind: 'to', status: 'sent', reply: null },
      ]);
    }
    assert.deepEqual(
      shapes[0].map((e: any) => `${e.kind}:${e.what}`),
      ['event:mail.accepted', 'attempt:sent', 'event:mail.sent'],
    );
    assert.deepEqual(shapes[1], shapes[0]);
  });
});
