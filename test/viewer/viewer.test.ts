/**
 * The public viewer: links made by the console's share action and by `postern message link`
 * open the message without an account (never its Bcc, metadata or provider details); unknown,
 * forged and expired links answer one identical 404; requests are limited per client address;
 * the signing key is created private in the state directory. Real server, real HTTP, real CLI.
 */
import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/log.js';
import { viewerSecret } from '../../src/policy/viewerKey.js';
import { viewerToken } from '../../src/policy/viewerTokens.js';
import { type ConsoleWorld, consoleWorld, expectError, expectStatus } from '../support/console.js';
import {
  cliEnv,
  type HttpResult,
  post,
  runCli,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { sqliteOnly } from '../support/postgres.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

const DAY = 86_400_000;

async function send(
  base: string,
  key: string,
  overrides: Record<string, unknown> = {},
): Promise<string> {
  const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
  assert.equal(res.status, 202, res.text);
  return res.body.id as string;
}

async function view(url: string): Promise<HttpResult & { bytes: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(HANG_GUARD_MS) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: undefined, text, bytes: text };
}

/** Every header that is not about this moment (Date) or this connection. */
function stableHeaders(h: Headers): Record<string, string> {
  return Object.fromEntries(
    [...h.entries()].filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name)),
  );
}

/** The key the server signs with, from where it keeps it (the state directory on SQLite, the database on PostgreSQL). */
const secretOf = (p: TestPostern) => viewerSecret(p.ctx.store, p.stateDir, silentLogger());

describe('public viewer', () => {
  let w: ConsoleWorld;
  const clock = new ManualClock(Date.parse('2031-03-04T10:00:00Z'));
  let id: string;

  before(async () => {
    w = await consoleWorld({ clock });
    id = await send(w.p.production, w.a.liveKey, {
      subject: 'Your invoice <March>',
      from: 'Billing <billing@example.com>',
      to: ['Ann <ann@example.org>'],
      cc: ['carl@example.org'],
      bcc: ['hidden-bcc@example.net'],
      html: '<p>Invoice <b>42</b></p><img src="https://tracker.example.net/pixel.png"><script>parent.document.title="pwned"</script>',
      text: 'Invoice 42',
      metadata: { customer_ref: 'secret-metadata-value' },
      attachments: [
        {
          filename: 'invoice-42.pdf',
          content: Buffer.from('%PDF-1.4 fake').toString('base64'),
          content_type: 'application/pdf',
        },
      ],
    });
  });
  after(() => w?.p.close());

  test('the share action makes a link that shows subject, from, to, cc, date, status, body and attachment names, never Bcc, metadata or provider details', async () => {
    const link = expectStatus(
      await w.member.post(`/messages/${id}/link`, { expires_in_seconds: 3600 }),
      201,
    );
    assert.equal(link.expires_at, new Date(clock.now() + 3600_000).toISOString());
    assert.ok(link.url.startsWith(`${w.p.production}/view/${id}/`), link.url);

    const page = await view(link.url);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /^text\/html/);
    assert.match(page.text, /<h1>Your invoice &lt;March&gt;<\/h1>/);
    assert.match(page.text, /<dd>billing@example.com<\/dd>/);
    assert.match(page.text, /ann@example.org/);
    assert.match(page.text, /carl@example.org/);
    assert.match(page.text, /2031-03-04 10:00:00 UTC/);
    // Where it stands, in a recipient's words (not the index's "queued").
    assert.match(page.text, /<span class="status">Being sent<\/span>/);
    assert.match(page.text, /invoice-42.pdf/);
    for (const hidden of [
      'hidden-bcc',
      'secret-metadata-value',
      'customer_ref',
      'smtp',
      '127.0.0.1:9',
      'Bcc',
    ])
      assert.ok(!page.text.includes(hidden), `the page shows ${hidden}`);
    // Security headers: no script at all, never framed, no referrer, no sniffing.
    const csp = page.headers.get('content-security-policy')!;
    assert.match(csp, /default-src 'none'/);
    assert.doesNotMatch(csp, /script-src/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');

    // The body, framed by the page: sandboxed (no scripts, an opaque origin), remote loads blocked.
    const frameSrc = /<iframe[^>]* sandbox="([^"]*)"[^>]* src="([^"]+)"/.exec(page.text);
    assert.ok(frameSrc, 'a sandboxed frame');
    assert.doesNotMatch(frameSrc[1], /allow-scripts|allow-same-origin/);
    const body = await view(new URL(frameSrc[2].replace(/&amp;/g, '&'), link.url).href);
    assert.equal(body.status, 200);
    assert.match(body.text, /Invoice <b>42<\/b>/);
    const bodyCsp = body.headers.get('content-security-policy')!;
    assert.match(bodyCsp, /default-src 'none'/);
    assert.match(bodyCsp, /sandbox(?![^;]*allow-scripts)/);
    // 'self': the message's own inline images (below); nothing remote.
    assert.match(bodyCsp, /img-src data: 'self';/);
    const withImages = await view(new URL(`${frameSrc[2]}?images=1`, link.url).href);
    assert.match(
      withImages.headers.get('content-security-policy')!,
      /img-src data: 'self' http: https:/,
    );

    const audit = expectStatus(await w.owner.get('/audit?action=message.link'), 200);
    assert.equal(audit.entries[0].target, id);
    assert.ok(
      !JSON.stringify(audit).includes(link.url.split('/').pop()),
      'the token is not in the audit log',
    );
  });

  test('inline images (cid:) are served from the message itself, under its link: the body points at them; a plain attachment is not served, nor anything under a forged or expired link', async () => {
    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAIAAAASFvFNAAAAEElEQVR4nGP4z8AAQQxwFgBB0gX7h/C5SAAAAABJRU5ErkJggg==',
      'base64',
    );
    const withLogo = await send(w.p.production, w.a.liveKey, {
      subject: 'With a logo',
      html: '<p><img src="cid:logo@shop.example"></p>',
      attachments: [
        {
          filename: 'logo.png',
          content: png.toString('base64'),
          content_type: 'image/png',
          content_id: 'logo@shop.example',
          disposition: 'inline',
        },
        {
          filename: 'terms.pdf',
          content: Buffer.from('%PDF-1.4 terms').toString('base64'),
          content_type: 'application/pdf',
        },
      ],
    });
    const link = expectStatus(
      await w.owner.post(`/messages/${withLogo}/link`, { expires_in_seconds: 60 }),
      201,
    ).url as string;
    const page = await view(link);
    assert.match(page.text, /terms\.pdf/);
    assert.doesNotMatch(page.text, /logo\.png/, 'an inline image is not listed as an attachment');
    const body = await view(`${link}/body`);
    const src = /<img src="([^"]+)">/.exec(body.text)?.[1];
    assert.equal(src, 'inline/0');
    const partUrl = new URL(src!, `${link}/body`).href;
    assert.equal(partUrl, `${link}/inline/0`);
    const part = await fetch(partUrl);
    assert.equal(part.status, 200);
    assert.equal(part.headers.get('content-type'), 'image/png');
    assert.equal(part.headers.get('x-content-type-options'), 'nosniff');
    assert.match(part.headers.get('content-security-policy')!, /default-src 'none'; sandbox/);
    assert.deepEqual(Buffer.from(await part.arrayBuffer()), png);

    const notFound = await view(`${w.p.production}/view/${withLogo}/not-a-token`);
    assert.equal(notFound.status, 404);
    for (const url of [
      `${link}/inline/1`,
      `${link}/inline/7`,
      `${link}/inline/x`,
      `${link.slice(0, -2)}AA/inline/0`,
    ]) {
      const refused = await view(url);
      assert.equal(refused.status, 404, url);
      assert.equal(refused.text, notFound.text);
    }
    clock.advance(61_000);
    assert.equal((await view(partUrl)).status, 404, 'an expired link serves no part');
  });

  test('unknown, forged and expired links all answer the same 404, byte for byte', async () => {
    const secret = await secretOf(w.p);
    const valid = expectStatus(
      await w.owner.post(`/messages/${id}/link`, { expires_in_seconds: 60 }),
      201,
    ).url as string;
    const token = valid.split('/').pop()!;
    const forgedToken = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
    const unknownId = `m_${'0'.repeat(26)}`;
    const candidates = {
      unknown: `${w.p.production}/view/${unknownId}/${viewerToken(secret, unknownId, clock.now() + DAY)}`,
      forged: `${w.p.production}/view/${id}/${forgedToken}`,
      otherMessage: `${w.p.production}/view/${await send(w.p.production, w.a.liveKey)}/${token}`,
      garbage: `${w.p.production}/view/${id}/not-a-token`,
    };
    assert.equal((await view(valid)).status, 200);
    clock.advance(61_000);
    const answers = [
      await view(valid),
      ...(await Promise.all(Object.values(candidates).map(view))),
    ];
    for (const a of answers) {
      assert.equal(a.status, 404);
      assert.equal(a.text, answers[0].text);
      assert.deepEqual(stableHeaders(a.headers), stableHeaders(answers[0].headers));
    }
    assert.doesNotMatch(answers[0].text, /expired|forged|unknown/i, 'the page does not say which');
    // Its body route too.
    assert.equal((await view(`${valid}/body`)).status, 404);
  });

  test("links can be revoked: the console lists a message's live links, and a revoked one answers the 404 of a forged one, byte for byte; the CLI lists and revokes them too", async () => {
    const first = expectStatus(
      await w.owner.post(`/messages/${id}/link`, { expires_in_seconds: 3600 }),
      201,
    );
    const second = expectStatus(
      await w.member.post(`/messages/${id}/link`, { expires_in_seconds: 7200 }),
      201,
    );
    const short = expectStatus(
      await w.owner.post(`/messages/${id}/link`, { expires_in_seconds: 60 }),
      201,
    );
    for (const l of [first, second, short]) assert.match(l.id, /^vl\.[0-9a-z]{16}$/);
    const listed = expectStatus(await w.member.get(`/messages/${id}/links`), 200).links;
    const mine = listed.filter((l: { id: string }) =>
      [first.id, second.id, short.id].includes(l.id),
    );
    // Made at one instant (the test's clock stands still): compared as a set.
    assert.deepEqual(
      mine.map((l: any) => [l.id, l.created_by_email, l.expires_at]).sort(),
      [
        [short.id, 'owner@example.com', short.expires_at],
        [second.id, 'member@example.com', second.expires_at],
        [first.id, 'owner@example.com', first.expires_at],
      ].sort(),
    );
    assert.ok(
      !JSON.stringify(listed).includes(first.url.split('/').pop()),
      'the list never shows a link itself',
    );
    assert.equal((await view(first.url)).status, 200);

    const forgedToken =
      first.url.split('/').pop()!.slice(0, -2) + (first.url.endsWith('AA') ? 'BB' : 'AA');
    const forged = await view(`${w.p.production}/view/${id}/${forgedToken}`);
    assert.deepEqual(
      expectStatus(await w.member.delete(`/messages/${id}/links/${first.id}`), 200),
      { id: first.id, revoked: true },
    );
    for (const url of [first.url, `${first.url}/body`, `${first.url}/inline/0`]) {
      const revoked = await view(url);
      assert.equal(revoked.status, 404, url);
      assert.equal(revoked.text, forged.text, 'the same page as a forged link');
      assert.deepEqual(stableHeaders(revoked.headers), stableHeaders(forged.headers));
    }
    assert.equal((await view(second.url)).status, 200, 'the other link still opens');
    expectError(await w.member.delete(`/messages/${id}/links/${first.id}`), 404, 'not_found');
    // An expired link is no longer listed.
    clock.advance(61_000);
    const live = expectStatus(await w.owner.get(`/messages/${id}/links`), 200).links.map(
      (l: { id: string }) => l.id,
    );
    assert.ok(
      live.includes(second.id) && !live.includes(first.id) && !live.includes(short.id),
      live.join(', '),
    );
    // Another project's message: not found for a member, as the message itself.
    const other = await send(w.p.production, w.b.liveKey);
    expectError(await w.member.get(`/messages/${other}/links`), 404, 'not_found');
    const audit = expectStatus(await w.owner.get('/audit?action=message.link_revoke'), 200).entries;
    assert.deepEqual(
      audit.map((e: any) => [e.target, e.details.link, e.actor_email]),
      [[id, first.id, 'member@example.com']],
    );

    // The CLI: list, then revoke.
    const cliList = await runCli(['message', 'links', id, '--json'], cliEnv(w.p));
    assert.equal(cliList.code, 0, cliList.stderr);
    assert.ok(cliList.json.links.some((l: { id: string }) => l.id === second.id));
    const cliRevoke = await runCli(
      ['message', 'revoke-link', id, second.id, '--json'],
      cliEnv(w.p),
    );
    assert.equal(cliRevoke.code, 0, cliRevoke.stderr);
    assert.deepEqual(cliRevoke.json, { id: second.id, revoked: true });
    assert.equal((await view(second.url)).status, 404);
  });

  test('the page says where the message stands in a recipient\'s words: a sandbox capture is a "Test message, not sent"; then "Sent", "Delivered"', async () => {
    const captured = await send(w.p.sandbox, w.a.testKey, { subject: 'Sandbox only' });
    const sandboxLink = expectStatus(await w.owner.post(`/messages/${captured}/link`), 201)
      .url as string;
    const sandboxPage = await view(sandboxLink);
    assert.match(sandboxPage.text, /<span class="status">Test message, not sent<\/span>/);
    assert.doesNotMatch(sandboxPage.text, /captured/);
    const real = await send(w.p.production, w.a.liveKey, { subject: 'Real one' });
    const link = expectStatus(await w.owner.post(`/messages/${real}/link`), 201).url as string;
    for (const [status, words] of [
      ['sent', 'Sent'],
      ['delivered', 'Delivered'],
      ['bounced', 'Not delivered: the receiving server refused it'],
    ] as const) {
      await w.p.ctx.store.run('UPDATE messages SET status = ? WHERE id = ?', status, real);
      assert.match(
        (await view(link)).text,
        new RegExp(`<span class="status">${words}</span>`),
        status,
      );
    }
  });

  test("the share action refuses an expiry past viewer.max_link_expiry_seconds, and a member cannot share another project's message", async () => {
    const err = expectError(
      await w.owner.post(`/messages/${id}/link`, { expires_in_seconds: 91 * 86_400 }),
      422,
      'expires_in_seconds:out_of_range',
    );
    assert.match(err.message, /at most|to 7776000/);
    const other = await send(w.p.production, w.b.liveKey);
    expectError(await w.member.post(`/messages/${other}/link`), 404, 'not_found');
  });

  test('postern message link ID --expires 7d --json prints {url, expires_at}, and the link opens the message', async () => {
    const config = path.join(w.p.stateDir, 'link-config.json');
    writeFileSync(
      config,
      JSON.stringify({ state_dir: w.p.stateDir, viewer: { base_url: `${w.p.production}/` } }),
    );
    const before = Date.now();
    const r = await runCli(['message', 'link', id, '--expires', '7d', '--json'], {
      ...cliEnv(w.p),
      POSTERN_CONFIG: config,
    });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(Object.keys(r.json).sort(), ['expires_at', 'id', 'url']);
    assert.match(r.json.id, /^vl\.[0-9a-z]{16}$/);
    const expires = Date.parse(r.json.expires_at);
    assert.ok(
      expires >= before + 7 * DAY - 1000 && expires <= Date.now() + 7 * DAY,
      r.json.expires_at,
    );
    assert.ok(r.json.url.startsWith(`${w.p.production}/view/${id}/`), r.json.url);
    // The server's clock is the test's; the CLI's is the system's: move the server to the CLI's now.
    const saved = clock.now();
    clock.set(Date.now());
    try {
      const page = await view(r.json.url);
      assert.equal(page.status, 200, page.text);
      assert.match(page.text, /Your invoice/);
    } finally {
      clock.set(saved);
    }
    const bad = await runCli(['message', 'link', id, '--expires', 'soon', '--json'], {
      ...cliEnv(w.p),
      POSTERN_CONFIG: config,
    });
    assert.equal(bad.code, 1);
    assert.equal(bad.json.error.code, 'invalid_argument');
    const unknown = await runCli(['message', 'link', `m_${'1'.repeat(26)}`, '--json'], {
      ...cliEnv(w.p),
      POSTERN_CONFIG: config,
    });
    assert.equal(unknown.json.error.code, 'not_found');
  });

  test('the signing key is created 0600 in the state directory', { skip: sqliteOnly() }, () => {
    const file = path.join(w.p.stateDir, 'viewer.key');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match(readFileSync(file, 'utf8'), /^[0-9a-f]{64}$/);
  });
});

describe('public viewer rate limit', () => {
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({
      config: {
        rate_limits: {
          send_per_key: 1000,
          batch_per_key: 1000,
          unauthenticated_per_ip: 1000,
          viewer_per_ip: 3,
        },
      },
    });
  });
  after(() => p?.close());

  test('past rate_limits.viewer_per_ip requests in the window, a client address gets 429 with Retry-After (valid links or not)', async () => {
    const url = `${p.production}/view/m_${'0'.repeat(26)}/x`;
    for (let i = 0; i < 3; i++) assert.equal((await view(url)).status, 404);
    const limited = await view(url);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    // The send API is not held by the viewer's window.
    assert.equal((await fetch(`${p.production}/healthz`)).status, 200);
  });

  test('a reload (SIGHUP) with another rate_limits.viewer_per_ip applies it: the window starts afresh under the new limit', async () => {
    const url = `${p.production}/view/m_${'1'.repeat(26)}/x`;
    // Spent under the running limit (3), whatever came before.
    const statuses: number[] = [];
    while (statuses.at(-1) !== 429 && statuses.length <= 3) statuses.push((await view(url)).status);
    assert.equal(statuses.at(-1), 429, statuses.join());
    assert.deepEqual(
      p.running.reload({ ...p.config, rate_limits: { ...p.config.rate_limits, viewer_per_ip: 5 } }),
      { changed: ['rate_limits'], restart_needed: [] },
    );
    const reloaded: number[] = [];
    for (let i = 0; i < 6; i++) reloaded.push((await view(url)).status);
    assert.deepEqual(reloaded, [404, 404, 404, 404, 404, 429]);
  });
});
