/**
 * The web console in a real browser (Debian's chromium, headless, driven by playwright-core)
 * against a real server: sign-in, the sandbox inbox's live updates, the HTML preview that never
 * runs a script and shows the message's own inline images (never a remote one until asked),
 * releasing messages (asked first, naming who they go to), bulk actions (asked first, naming
 * how many), keys shown once, webhooks' test button and secret rotation, DKIM keys that sign,
 * what a member may see, a generated password changed at first sign-in, a lost connection and
 * an expired session, and the quality points (keyboard, phone width, empty states, pagination,
 * local times, no layout shift). One server and one browser for the file, a context each; every
 * page's console and the app's own requests are watched, and a test fails on any error there it
 * did not provoke.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { attachProvider } from '../../src/operator/providers.js';
import {
  endTestTabs,
  launchBrowser,
  newContext,
  PageProblems,
  type StorageState,
  signIn,
} from '../support/browser.js';
import {
  ConsoleClient,
  type ConsoleWorld,
  consoleWorld,
  expectError,
  expectStatus,
  operatorAccount,
  PASSWORD,
} from '../support/console.js';
import { mailauthVerify, pythonVerify } from '../support/dkimVerifiers.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  startTestPostern,
  validMessage,
} from '../support/postern.js';
import { Sink } from '../support/relaySink.js';
import { TcpGate } from '../support/tcpGate.js';
import { waitFor } from '../support/waiting.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const OWNER = 'owner@example.com';
const MEMBER = 'member@example.com';
/** An owner whose session the expiry test ends (the others keep theirs). */
const LAPSING = 'lapsing@example.com';
/** A 3 × 2 red PNG: an inline image whose size proves it is this one. */
const PNG_3X2 =
  'iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAIAAAASFvFNAAAAEElEQVR4nGP4z8AAQQxwFgBB0gX7h/C5SAAAAABJRU5ErkJggg==';
const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

async function send(
  base: string,
  key: string,
  overrides: Record<string, unknown> = {},
): Promise<string> {
  const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
  assert.equal(res.status, 202, res.text);
  return res.body.id as string;
}

/** A remote image host (a tracker, as far as the message is concerned): records every request it gets. */
class ImageHost {
  readonly requests: string[] = [];
  private constructor(private readonly server: Server) {}

  static async start(): Promise<ImageHost> {
    const server = createServer((req, res) => {
      host.requests.push(req.url ?? '');
      res.writeHead(200, { 'Content-Type': 'image/png', 'Cache-Control': 'no-store' });
      res.end(Buffer.from(PNG_1X1, 'base64'));
    });
    const host = new ImageHost(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return host;
  }

  url(path: string): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  asked(path: string): number {
    return this.requests.filter((r) => r === path).length;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** An image of a framed body once the browser is done with it: its natural size (0 × 0: not shown: blocked or broken). */
async function imageSize(
  frame: ReturnType<Page['frameLocator']>,
  selector: string,
): Promise<[number, number]> {
  const img = frame.locator(selector);
  await img.waitFor({ state: 'attached' });
  await waitFor(
    () => img.evaluate((i: HTMLImageElement) => i.complete),
    15_000,
    `${selector} loaded or refused`,
  );
  return img.evaluate(
    (i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight] as [number, number],
  );
}

describe('web console in a browser', () => {
  let w: ConsoleWorld;
  let browser: Browser;
  let receiver: WebhookReceiver;
  let images: ImageHost;
  let inbox: ProjectWithKeys;
  let live: ProjectWithKeys;
  let empty: ProjectWithKeys;
  let paged: ProjectWithKeys;
  let counting: ProjectWithKeys;
  let retrying: ProjectWithKeys;
  let bulk: ProjectWithKeys;
  let pausing: ProjectWithKeys;
  let outage: ProjectWithKeys;
  let deleting: ProjectWithKeys;
  let lapsing: ProjectWithKeys;
  let lapsingId: string;
  const contexts: BrowserContext[] = [];
  /** The pages of the running test: none may show an error it did not provoke. */
  const watched: PageProblems[] = [];

  /** Watches a page for errors (console, the app's own failed requests) until the test ends. */
  function watch(page: Page, origins = [w.p.console]): PageProblems {
    const problems = new PageProblems(page, origins);
    watched.push(problems);
    return problems;
  }

  /** Each operator's first sign-in through the form, kept (cookie and local storage) for the next tests' contexts. */
  const signedInOnce = new Map<string, StorageState>();

  /** A page in a fresh context (own cookies), signed in as `email` (on the shared server, in the session of its first sign-in), watched. */
  async function signedIn(
    email = OWNER,
    opts: { viewport?: 'desktop' | 'phone'; base?: string } = {},
  ): Promise<{ page: Page; problems: PageProblems }> {
    const base = opts.base ?? w.p.console;
    const kept = base === w.p.console ? signedInOnce.get(email) : undefined;
    const ctx = await newContext(browser, base, opts.viewport, kept);
    contexts.push(ctx);
    const page = await ctx.newPage();
    const problems = watch(page, [base]);
    if (kept) {
      await page.goto('/');
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
    } else {
      await signIn(page, email, PASSWORD);
      if (base === w.p.console) signedInOnce.set(email, await ctx.storageState());
    }
    return { page, problems };
  }

  /** The operator's sessions, last used longer ago than the idle timeout: as if left unused that long. */
  async function expireSessions(operatorId: string): Promise<void> {
    const idleMs = w.p.config.console.session_idle_seconds * 1000;
    await w.p.ctx.store.run(
      'UPDATE operator_sessions SET last_seen_at = ? WHERE operator_id = ?',
      Date.now() - idleMs - 60_000,
      operatorId,
    );
  }

  before(async () => {
    receiver = await WebhookReceiver.start();
    images = await ImageHost.start();
    w = await consoleWorld({
      config: {
        webhooks: { allow_private_targets: true, enabled: false },
        node: { id: 'web-node' },
      },
    });
    // Projects the tests use alone (the app loads the project list at sign-in).
    inbox = await createProjectWithKeys(w.p.ctx, 'inbox project');
    live = await createProjectWithKeys(w.p.ctx, 'live project');
    empty = await createProjectWithKeys(w.p.ctx, 'empty project');
    paged = await createProjectWithKeys(w.p.ctx, 'paged project');
    counting = await createProjectWithKeys(w.p.ctx, 'counting project');
    retrying = await createProjectWithKeys(w.p.ctx, 'retrying project');
    bulk = await createProjectWithKeys(w.p.ctx, 'bulk project');
    pausing = await createProjectWithKeys(w.p.ctx, 'pausing project');
    outage = await createProjectWithKeys(w.p.ctx, 'outage project');
    deleting = await createProjectWithKeys(w.p.ctx, 'deleting project');
    lapsing = await createProjectWithKeys(w.p.ctx, 'lapsing project');
    lapsingId = (await operatorAccount(w.p.ctx, LAPSING, 'owner')).id;
    browser = await launchBrowser();
  });
  afterEach(async () => {
    assert.deepEqual(
      await endTestTabs(contexts, watched),
      [],
      "nothing in the browser's console, and no failed request of the app's own, that the test did not provoke",
    );
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await w?.p.close();
    await receiver?.close();
    await images?.close();
  });

  test('the console page and API answers carry the security headers (no inline script allowed, never framed, no sniffing, no referrer)', async () => {
    const res = await fetch(`${w.p.console}/`);
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy')!;
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script in the page');
    const asset = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)![1];
    const js = await fetch(`${w.p.console}/${asset}`);
    assert.equal(js.status, 200);
    assert.match(js.headers.get('content-type')!, /^text\/javascript/);
    assert.match(js.headers.get('cache-control')!, /immutable/);
    const api = await fetch(`${w.p.console}/console/api/v1/session`);
    assert.equal(api.status, 401);
    assert.match(
      api.headers.get('content-security-policy')!,
      /default-src 'none'.*frame-ancestors 'none'/,
    );
    assert.equal(api.headers.get('referrer-policy'), 'no-referrer');
  });

  test("sign-in by keyboard alone: a wrong password shows the API's message; the right one opens the overview with its 24 h chart and its Nodes panel", async () => {
    const ctx = await newContext(browser, w.p.console);
    contexts.push(ctx);
    const page = await ctx.newPage();
    // The wrong password's refusal, as the browser reports it.
    watch(page).expect(/answer 401: POST .*\/session$/, /status of 401/);
    await page.goto('/');
    // The email field takes the focus: type, Tab, type, Enter.
    await page.waitForFunction(() => document.activeElement?.getAttribute('name') === 'email');
    await page.keyboard.type(OWNER);
    await page.keyboard.press('Tab');
    await page.keyboard.type('not the password');
    await page.keyboard.press('Enter');
    await page
      .getByRole('alert')
      .getByText(/email or password/i)
      .waitFor();
    await page.getByLabel('Password').fill(PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page
      .getByRole('img', { name: /per hour over the last 24 hours/ })
      .locator('canvas')
      .waitFor();
    // The Nodes panel names this server, up.
    await page
      .getByRole('region', { name: 'Nodes' })
      .getByRole('row')
      .filter({ hasText: 'web-node' })
      .filter({ hasText: 'up' })
      .waitFor();
    // Keyboard: the navigation's links are reachable with Tab and open their screen with Enter.
    await page.getByRole('link', { name: 'Messages', exact: true }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Messages' }).waitFor();
  });

  test('a message sent to the sandbox API appears in the open inbox without a reload, with the sandbox marker; opened, its HTML shows in the preview; released (asked first, naming its real recipients), its status changes', async () => {
    const { page } = await signedIn();
    await page.goto(`/#/projects/${inbox.project.id}/inbox`);
    await page.getByText('No sandbox messages yet.').waitFor();
    // The empty state tells what to do next: a curl to this server's sandbox listener.
    assert.match(
      (await page.locator('pre.code').textContent()) ?? '',
      new RegExp(`curl -X POST ${w.p.sandbox}/v1/send`),
    );
    await page.evaluate(() => ((window as unknown as { notReloaded: boolean }).notReloaded = true));

    const id = await send(w.p.sandbox, inbox.testKey, {
      subject: 'Welcome aboard',
      html: '<h1 id="greeting">Welcome, Ann</h1>',
      to: 'Ann <ann@example.org>',
      cc: 'carl@example.org',
      bcc: 'audit@example.net',
    });
    const row = page.locator(`tr[data-id="${id}"]`);
    await row.waitFor();
    assert.equal(await row.locator('.badge.sandbox').textContent(), 'sandbox');
    assert.equal(await row.locator('.badge').first().textContent(), 'captured');
    assert.equal(
      await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded),
      true,
      'the page was not reloaded',
    );

    await row.getByRole('link', { name: 'Welcome aboard' }).click();
    await page.getByRole('heading', { name: 'Welcome aboard' }).waitFor();
    const preview = page.frameLocator('iframe.preview');
    assert.equal(await preview.locator('#greeting').textContent(), 'Welcome, Ann');
    assert.equal(
      await page.locator('iframe.preview').getAttribute('sandbox'),
      'allow-popups allow-popups-to-escape-sandbox',
    );

    // Release asks first: the message leaves the sandbox for its real recipients, all of them named.
    const releases: string[] = [];
    page.on(
      'request',
      (r) => r.url().endsWith(`/messages/${id}/release`) && releases.push(r.method()),
    );
    await page.getByRole('button', { name: 'Release' }).click();
    const dialog = page.getByRole('dialog', {
      name: 'Release this sandbox message to its real recipients?',
    });
    await dialog.waitFor();
    const named = (await dialog.locator('.recipients-to-be').innerText()).replace(/\s+/g, ' ');
    for (const r of ['ann@example.org', 'carl@example.org', 'audit@example.net'])
      assert.ok(named.includes(r), `${r} named: ${named}`);
    await dialog.getByRole('button', { name: 'Keep it held' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.deepEqual(releases, [], 'kept held: nothing was asked of the server');
    assert.equal(expectStatus(await w.owner.get(`/messages/${id}`), 200).status, 'captured');

    await page.getByRole('button', { name: 'Release' }).click();
    await dialog.getByRole('button', { name: 'Release and send to 3 recipients' }).click();
    await page.locator('.summary-line .badge').first().getByText('queued').waitFor();
    await page.getByRole('status').getByText('Released: it is queued for delivery now.').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Release' }).isDisabled(), true);
    assert.deepEqual(releases, ['POST']);
  });

  test("a <script> in a message's HTML never runs: not in the console preview, not in the public viewer", async () => {
    const html =
      '<p id="shown">Shown</p>' +
      '<script>document.body.setAttribute("data-ran","1");fetch("/pwned-script");alert("pwned");parent.document.title="pwned"</script>' +
      '<img src="data:," onload="fetch(\'/pwned-onload\')" onerror="fetch(\'/pwned-onerror\')">';
    const id = await send(w.p.production, w.a.liveKey, { subject: 'Scripted', html });
    const { page, problems } = await signedIn();
    // The browser refusing the message's scripts is what this test provokes.
    problems.expect(/Blocked script execution|Refused to execute/);
    const pwned: string[] = [];
    page.context().on('request', (r) => r.url().includes('pwned') && pwned.push(r.url()));
    page.on('dialog', (d) => {
      pwned.push(`dialog: ${d.message()}`);
      void d.dismiss();
    });
    await page.goto(`/#/messages/${id}`);
    const preview = page.frameLocator('iframe.preview');
    assert.equal(await preview.locator('#shown').textContent(), 'Shown');
    // Its document loaded: the script would have run, the image's handlers fired (before the load event).
    await (await (await page
      .locator('iframe.preview')
      .elementHandle())!.contentFrame())!.waitForLoadState('load');
    assert.equal(await preview.locator('body').getAttribute('data-ran'), null);
    assert.notEqual(await page.title(), 'pwned');

    // The public viewer, opened from the share action.
    await page.getByRole('button', { name: 'Share' }).click();
    const url = await page.locator('.share-link a').getAttribute('href');
    assert.ok(url?.startsWith(`${w.p.production}/view/${id}/`), url ?? '');
    const viewer = await page.context().newPage();
    watch(viewer, [w.p.production]).expect(/Blocked script execution|Refused to execute/);
    viewer.on('dialog', (d) => {
      pwned.push(`viewer dialog: ${d.message()}`);
      void d.dismiss();
    });
    await viewer.goto(url!);
    await viewer.getByRole('heading', { name: 'Scripted' }).waitFor();
    const body = viewer.frameLocator('iframe');
    assert.equal(await body.locator('#shown').textContent(), 'Shown');
    await (await (await viewer
      .locator('iframe')
      .elementHandle())!.contentFrame())!.waitForLoadState('load');
    assert.equal(await body.locator('body').getAttribute('data-ran'), null);
    assert.equal(await viewer.title(), 'Scripted');
    assert.deepEqual(pwned, []);
  });

  test('inline images (cid:) show in the preview and in the public viewer, from the message itself; a remote image loads only once asked, in both', async () => {
    const html =
      '<p>Our logo: <img id="logo" src="cid:logo@shop.example" alt="logo"></p>' +
      '<div id="banner" style="width:3px;height:2px;background:url(cid:logo%40shop.example)"></div>' +
      `<p><img id="remote" src="${images.url('/remote-c.png')}" alt="remote"></p>`;
    const id = await send(w.p.production, w.a.liveKey, {
      subject: 'Inline logo',
      html,
      attachments: [
        {
          filename: 'logo.png',
          content: PNG_3X2,
          content_type: 'image/png',
          content_id: 'logo@shop.example',
          disposition: 'inline',
        },
        {
          filename: 'terms.txt',
          content: Buffer.from('terms').toString('base64'),
          content_type: 'text/plain',
        },
      ],
    });
    const { page, problems } = await signedIn();
    // Blocking the remote image until asked is what this test provokes.
    problems.expect(/image '.*\/remote-c\.png' violates the following Content Security Policy/);
    await page.goto(`/#/messages/${id}`);
    await page.getByRole('heading', { name: 'Inline logo' }).waitFor();
    const preview = page.frameLocator('iframe.preview');
    assert.deepEqual(await imageSize(preview, '#logo'), [3, 2], 'the inline image shows');
    assert.deepEqual(await imageSize(preview, '#remote'), [0, 0], 'the remote one does not');
    assert.equal(images.asked('/remote-c.png'), 0);
    await page.getByRole('button', { name: 'Show remote images' }).click();
    await page.getByText('Remote images are shown.').waitFor();
    await waitFor(() => images.asked('/remote-c.png') === 1, 15_000, 'the remote image asked for');
    assert.deepEqual(await imageSize(preview, '#remote'), [1, 1]);
    assert.deepEqual(await imageSize(preview, '#logo'), [3, 2], 'the inline image still shows');

    await page.getByRole('button', { name: 'Share' }).click();
    const url = (await page.locator('.share-link a').getAttribute('href'))!;
    const viewer = await page.context().newPage();
    watch(viewer, [w.p.production]).expect(
      /image '.*\/remote-c\.png' violates the following Content Security Policy/,
    );
    await viewer.goto(url);
    await viewer.getByRole('heading', { name: 'Inline logo' }).waitFor();
    const body = viewer.frameLocator('iframe');
    assert.deepEqual(await imageSize(body, '#logo'), [3, 2], 'the viewer shows the inline image');
    assert.deepEqual(await imageSize(body, '#remote'), [0, 0]);
    assert.equal(images.asked('/remote-c.png'), 1, 'the viewer asked for no remote image');
    // The attachment is named, the inline image is not listed as one.
    assert.match(await viewer.locator('dl').innerText(), /terms\.txt/);
    assert.doesNotMatch(await viewer.locator('dl').innerText(), /logo\.png/);
    await viewer.getByRole('link', { name: 'Show remote images' }).click();
    await waitFor(
      () => images.asked('/remote-c.png') === 2,
      15_000,
      'the viewer asked for the remote image',
    );
    assert.deepEqual(await imageSize(body, '#remote'), [1, 1]);
    assert.deepEqual(await imageSize(body, '#logo'), [3, 2]);
  });

  test("each message opens clean: another message opened from the address bar shows neither the last one's share link nor its remote images", async () => {
    const a = await send(w.p.production, w.a.liveKey, {
      subject: 'Message A',
      html: '<p id="a-body">A</p>',
    });
    const b = await send(w.p.production, w.a.liveKey, {
      subject: 'Message B',
      html: `<p id="b-body">B</p><img id="pixel" src="${images.url('/pixel-b.gif')}">`,
    });
    const { page, problems } = await signedIn();
    problems.expect(/image '.*\/pixel-b\.gif' violates the following Content Security Policy/);
    await page.goto(`/#/messages/${a}`);
    await page.getByRole('heading', { name: 'Message A' }).waitFor();
    await page.getByRole('button', { name: 'Share' }).click();
    await page.locator('.share-link').waitFor();
    await page.getByRole('button', { name: 'Show remote images' }).click();
    await page.getByText('Remote images are shown.').waitFor();

    // Message B, from the address bar: the app is not reloaded.
    await page.goto(`/#/messages/${b}`);
    await page.getByRole('heading', { name: 'Message B' }).waitFor();
    const preview = page.frameLocator('iframe.preview');
    await preview.locator('#b-body').waitFor();
    assert.deepEqual(await imageSize(preview, '#pixel'), [0, 0]);
    assert.equal(
      images.asked('/pixel-b.gif'),
      0,
      "B's tracking pixel was not loaded without being asked",
    );
    assert.equal(await page.locator('.share-link').count(), 0, "A's link is not shown under B");
    await page.getByText(/Remote images are blocked/).waitFor();
    // Asked, it loads: the test sees the pixel when it is asked for.
    await page.getByRole('button', { name: 'Show remote images' }).click();
    await waitFor(() => images.asked('/pixel-b.gif') === 1, 15_000, 'the pixel asked for');
  });

  test('deleting a captured message (asked first) goes back to the inbox and never asks for the message again', async () => {
    const id = await send(w.p.sandbox, deleting.testKey, { subject: 'To be deleted' });
    const { page } = await signedIn();
    const asked: string[] = [];
    page.on(
      'request',
      (r) => r.url().includes(id) && asked.push(`${r.method()} ${new URL(r.url()).pathname}`),
    );
    await page.goto(`/#/messages/${id}`);
    await page.getByRole('heading', { name: 'To be deleted' }).waitFor();
    await page.getByRole('button', { name: 'Delete' }).click();
    await page
      .getByRole('dialog', { name: 'Delete this captured message?' })
      .getByRole('button', { name: 'Delete it' })
      .click();
    await page.getByRole('heading', { name: /Sandbox inbox/ }).waitFor();
    // A message sent after the delete comes through the same stream as the delete's announcement:
    // once it shows, the announcement has been handled too.
    const later = await send(w.p.sandbox, deleting.testKey, { subject: 'After the delete' });
    await page.locator(`tr[data-id="${later}"]`).waitFor({ timeout: 15_000 });
    const deleted = asked.indexOf(`DELETE /console/api/v1/messages/${id}`);
    assert.ok(deleted >= 0, asked.join('\n'));
    assert.deepEqual(asked.slice(deleted + 1), [], 'nothing asked for the deleted message');
    // Back does not return to a message that is gone.
    await page.goBack();
    assert.ok(!page.url().includes(id), page.url());
  });

  test('a paused production message is released from its page (asked first), and its status changes; retry now says what it did', async () => {
    const id = await send(w.p.production, w.a.liveKey, {
      subject: 'Held for review',
      paused: true,
    });
    const { page } = await signedIn();
    await page.goto(`/#/messages/${id}`);
    const status = page.locator('.summary-line .badge').first();
    await status.getByText('paused').waitFor();
    assert.equal(
      await page.locator('.badge.sandbox').count(),
      0,
      'production mail has no sandbox marker',
    );
    await page.getByRole('button', { name: 'Release' }).click();
    const dialog = page.getByRole('dialog', { name: 'Release this message?' });
    assert.match(await dialog.locator('.recipients-to-be').innerText(), /rcpt@example\.org/);
    await dialog.getByRole('button', { name: 'Release and send to 1 recipient' }).click();
    await status.getByText('queued').waitFor();

    // On the retry ladder (as a failed hand-off leaves it): retry now, and the page says what happened.
    await w.p.ctx.store.run(
      'UPDATE messages SET next_attempt_at = ?, attempts = 1 WHERE id = ?',
      Date.now() + 3600_000,
      id,
    );
    await page.reload();
    await page.getByRole('heading', { name: 'Held for review' }).waitFor();
    await page.getByRole('button', { name: 'Retry now' }).click();
    await page
      .getByRole('status')
      .getByText(/Retry now: the message is due at once; its next attempt \(attempt 2\)/)
      .waitFor();
    // The audit log (owners) has the release and the retry.
    await page.goto('/#/audit');
    await page.getByRole('cell', { name: 'message.release' }).first().waitFor();
    await page.getByRole('cell', { name: 'message.retry' }).first().waitFor();
  });

  test('a new API key is shown once, with a copy button, then only its hint', async () => {
    const { page } = await signedIn();
    await page.goto(`/#/projects/${w.a.project.id}/keys`);
    await page.locator('table').first().waitFor();
    await page.getByLabel(/^Name/).fill('browser test key');
    await page.getByLabel(/^Mode/).selectOption('live');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = page.getByTestId('secret');
    const key = (await secret.textContent())!;
    assert.match(key, /^ps_live_[A-Za-z0-9]{40}$/);
    await page.locator('.shown-once').getByRole('button', { name: 'Copy' }).click();
    await page.locator('.shown-once').getByText('Copied').waitFor();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    assert.equal(await page.getByTestId('secret').count(), 0);
    const hint = key.slice(-4);
    await page
      .getByRole('cell', { name: new RegExp(hint) })
      .first()
      .waitFor();
    await page.reload();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await page
      .getByRole('cell', { name: new RegExp(hint) })
      .first()
      .waitFor();
    assert.ok(!(await page.content()).includes(key), 'the full key is never shown again');
  });

  test("webhooks: the test button's delivery shows in the endpoint's log; rotating the secret (asked first) shows the new one once", async () => {
    const { page } = await signedIn(MEMBER);
    await page.goto(`/#/projects/${w.a.project.id}/webhooks`);
    await page.getByText('No webhook endpoints yet.').waitFor();
    await page.getByLabel('URL').fill(receiver.url('/browser-hook'));
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const first = (await page.getByTestId('secret').textContent())!;
    assert.match(first, /^whsec_/);
    await page.getByRole('button', { name: 'I have saved it' }).click();

    await page.getByRole('button', { name: 'Send test event' }).click();
    await page
      .getByRole('status')
      .getByText(/delivered \(HTTP 200\)/)
      .waitFor();
    const log = page.locator('tbody.attempts tr');
    await log.first().waitFor();
    assert.match((await log.first().textContent())!, /webhook\.test.*200 delivered/);
    assert.equal(receiver.received.filter((r) => r.path === '/browser-hook').length, 1);

    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page
      .getByRole('dialog', { name: 'Rotate the signing secret?' })
      .getByRole('button', { name: 'Rotate the secret' })
      .click();
    const rotated = (await page.getByTestId('secret').textContent())!;
    assert.match(rotated, /^whsec_/);
    assert.notEqual(rotated, first);
    await page.getByText(/previous secret valid until/).waitFor();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    assert.ok(!(await page.content()).includes(rotated));
  });

  test('DKIM: keys added in the console (RSA and Ed25519) show their TXT record, and sign the mail Postern then delivers: mailauth and python3-dkim verify it against the record shown', async (t) => {
    const relay = await Sink.start('dkim-relay');
    const d = await startTestPostern({
      console: true,
      config: { delivery: { enabled: true, poll_interval_ms: 30 } },
    });
    t.after(async () => {
      await d.close();
      await relay.close();
    });
    const signed = await createProjectWithKeys(d.ctx, 'signed project', 'pro', { provider: false });
    await attachProvider(d.ctx, signed.project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: String(relay.port),
      tls: 'none',
    });
    await operatorAccount(d.ctx, OWNER, 'owner');
    const { page } = await signedIn(OWNER, { base: d.console });
    await page.goto(`/#/projects/${signed.project.id}/dkim`);
    await page.getByText('No DKIM keys yet.').waitFor();

    /** Adds a key through the form; the TXT record as the page shows it. */
    async function addKey(
      domain: string,
      selector: string,
      algorithm?: string,
    ): Promise<{ name: string; value: string }> {
      await page.getByLabel('Domain', { exact: true }).fill(domain);
      await page.getByLabel('Selector', { exact: true }).fill(selector);
      if (algorithm) await page.getByLabel('Algorithm').selectOption({ label: algorithm });
      await page.getByRole('button', { name: 'Add key' }).click();
      const card = page.getByRole('article', { name: `DKIM key ${selector}._domainkey.${domain}` });
      await card.getByRole('status').getByText('Key added.', { exact: false }).waitFor();
      const name = (await card.locator('code').first().textContent())!;
      const value = (await card.locator('code.dns-value').textContent())!;
      return { name, value };
    }
    const rsa = await addKey('example.com', 'console1');
    assert.equal(rsa.name, 'console1._domainkey.example.com');
    assert.match(rsa.value, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+$/);
    const ed = await addKey('example.org', 'console2', 'Ed25519 (ed25519-sha256)');
    assert.equal(ed.name, 'console2._domainkey.example.org');
    assert.match(ed.value, /^v=DKIM1; k=ed25519; p=[A-Za-z0-9+/=]{44}$/);

    await send(d.production, signed.liveKey, {
      from: 'Shop <shop@example.com>',
      subject: 'Signed with RSA',
    });
    await send(d.production, signed.liveKey, {
      from: 'Shop <shop@example.org>',
      subject: 'Signed with Ed25519',
    });
    await waitFor(
      () => relay.received.length === 2,
      20_000,
      'both messages delivered to the relay',
    );
    for (const [from, record, algo] of [
      ['shop@example.com', rsa, 'rsa-sha256'],
      ['shop@example.org', ed, 'ed25519-sha256'],
    ] as const) {
      const delivered = relay.received.find((m) => m.from === from)!.raw;
      const { result } = await mailauthVerify(delivered, record.name, record.value);
      assert.equal(result.results.length, 1, `${from}: one signature`);
      assert.equal(result.results[0].status.result, 'pass', `${from}: ${result.results[0].info}`);
      assert.equal((result.results[0] as unknown as { algo: string }).algo, algo);
      assert.deepEqual(
        pythonVerify([{ message: delivered, name: record.name, value: record.value }]),
        ['pass'],
        from,
      );
    }
  });

  test("providers: an owner runs the connection check and sees its failure, and changes an account's priority and free quota", async () => {
    const { page } = await signedIn();
    await page.goto(`/#/projects/${w.a.project.id}/providers`);
    const row = page.locator('tbody tr').first();
    await row.waitFor();
    await row.getByRole('button', { name: 'Check connection' }).click();
    // The test world's relay is 127.0.0.1:9, where nothing listens.
    await row.getByText(/Failed at connect/).waitFor();
    await row.getByLabel('Priority', { exact: true }).fill('7');
    await row.getByLabel(/Free quota/).fill('3000');
    // Saved, the list is read again.
    await Promise.all([
      page.waitForResponse((r) => r.url().endsWith(`/projects/${w.a.project.id}/providers`)),
      row.getByRole('button', { name: 'Save' }).click(),
    ]);
    const listed = await w.owner.get(`/projects/${w.a.project.id}/providers`);
    assert.deepEqual(
      listed.body.providers.map((p: { priority: number; free_quota: number | null }) => [
        p.priority,
        p.free_quota,
      ]),
      [[7, 3000]],
    );
  });

  test('a member sees only their projects\' messages; another project\'s message is "not found"', async () => {
    const mine = await send(w.p.production, w.a.liveKey, { subject: 'For the member' });
    const theirs = await send(w.p.production, w.b.liveKey, { subject: 'Project b only' });
    const { page, problems } = await signedIn(MEMBER);
    // Asking for another project's message is what this test provokes.
    problems.expect(
      new RegExp(`answer 404: GET .*/messages/${theirs.replace('.', '\\.')}`),
      /status of 404/,
    );
    const picker = page.locator('.project-picker select');
    await picker.locator('option', { hasText: 'project a' }).waitFor({ state: 'attached' });
    assert.deepEqual(await picker.locator('option').allTextContents(), ['project a']);
    assert.equal(await page.getByRole('link', { name: 'Operators' }).count(), 0);
    await page.goto('/#/messages');
    await page.locator(`tr[data-id="${mine}"]`).waitFor();
    assert.equal(await page.locator(`tr[data-id="${theirs}"]`).count(), 0);
    assert.equal(await page.getByText('Project b only').count(), 0);
    await page.goto(`/#/messages/${theirs}`);
    await page
      .getByRole('alert')
      .getByText(/not found/i)
      .waitFor();
    assert.equal(await page.getByText('Project b only').count(), 0);
  });

  test('live updates never move the rows on screen: a new message is counted in the live bar until shown; a status change is made in place', async () => {
    const older = await send(w.p.sandbox, live.testKey, { subject: 'First' });
    await send(w.p.sandbox, live.testKey, { subject: 'Second' });
    const { page } = await signedIn();
    await page.goto(`/#/projects/${live.project.id}/inbox`);
    const rows = page.locator('tbody tr');
    await rows.nth(1).waitFor();
    const boxes = async () =>
      Promise.all([0, 1].map(async (i) => (await rows.nth(i).boundingBox())!));
    const before = await boxes();

    await send(w.p.sandbox, live.testKey, { subject: 'Third' });
    await page.getByRole('button', { name: /1 new or changed message — show/ }).waitFor();
    assert.deepEqual(await boxes(), before);
    assert.equal(await rows.count(), 2);

    // Released elsewhere (the API): the row's status changes where it is.
    const released = await w.owner.post(`/messages/${older}/release`);
    assert.equal(released.status, 200, released.text);
    await page.locator(`tr[data-id="${older}"] .badge`).first().getByText('queued').waitFor();
    assert.deepEqual(await boxes(), before);

    await page.getByRole('button', { name: /new or changed message/ }).click();
    await page.getByRole('link', { name: 'Third' }).waitFor();
  });

  test('the live bar counts messages, not announcements: two changed by a bulk action elsewhere count two, a new one three; shown, the list is up to date', async () => {
    const ids: string[] = [];
    for (const n of [1, 2, 3])
      ids.push(await send(w.p.sandbox, counting.testKey, { subject: `Counted ${n}` }));
    const { page } = await signedIn();
    await page.goto(`/#/projects/${counting.project.id}/inbox`);
    await page.locator('tbody tr').nth(2).waitFor();
    await page.locator('.live-bar').getByText('up to date').waitFor({ timeout: 15_000 });

    const released = expectStatus(
      await w.owner.post('/messages/bulk', { action: 'release', ids: ids.slice(0, 2) }),
      200,
    );
    assert.equal(released.changed, 2);
    await page
      .getByRole('button', { name: '2 new or changed messages — show' })
      .waitFor({ timeout: 15_000 });
    const fourth = await send(w.p.sandbox, counting.testKey, { subject: 'Counted 4' });
    await page
      .getByRole('button', { name: '3 new or changed messages — show' })
      .waitFor({ timeout: 15_000 });
    await page.getByRole('button', { name: '3 new or changed messages — show' }).click();
    await page.locator(`tr[data-id="${fourth}"]`).waitFor();
    await page.locator('.live-bar').getByText('up to date').waitFor();
    for (const id of ids.slice(0, 2))
      assert.equal(
        await page.locator(`tr[data-id="${id}"] .badge`).first().textContent(),
        'queued',
      );
  });

  test('bulk retry now (asked first, with the count) changes the rows on screen in place and says what it did; the list never claims that nothing matches, nor counts its own action as news', async () => {
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      const id = await send(w.p.production, retrying.liveKey, { subject: `Waiting ${n}` });
      // On the retry ladder, as a failed hand-off leaves a message (delivery is off in this world).
      await w.p.ctx.store.run(
        'UPDATE messages SET next_attempt_at = ?, attempts = 1 WHERE id = ?',
        Date.now() + 3600_000,
        id,
      );
      ids.push(id);
    }
    const { page } = await signedIn();
    await page.goto(`/#/messages?project=${retrying.project.id}&status=queued`);
    await page.locator('tbody tr').nth(2).waitFor();
    await page.locator('.live-bar').getByText('up to date').waitFor({ timeout: 15_000 });
    await page.getByLabel('Select all on this page').check();
    // Made due, the messages are taken by delivery at once: `sending`, which the live stream does not
    // announce. The answer is held until they are (as a busy server's would arrive after that).
    await page.route('**/console/api/v1/messages/bulk', async (route) => {
      if ((route.request().postDataJSON() as { dry_run?: boolean }).dry_run)
        return route.continue();
      const response = await route.fetch();
      for (const id of ids)
        await w.p.ctx.store.run("UPDATE messages SET status = 'sending' WHERE id = ?", id);
      await route.fulfill({ response });
    });
    try {
      await page.locator('.bulk-bar').getByRole('button', { name: 'Retry now' }).click();
      const dialog = page.getByRole('dialog', { name: 'Retry now 3 messages?' });
      await dialog.getByText('Each is tried again at once').waitFor();
      await dialog.getByRole('button', { name: 'Retry now 3 messages' }).click();
      await page.getByRole('status').getByText('Retry now: 3 messages are due at once.').waitFor();
      assert.equal(await page.locator('tbody tr').count(), 3, 'the rows stay');
      assert.equal(await page.getByText(/No messages match/).count(), 0);
      // A message accepted after the action comes through the stream after its note: counted alone.
      await send(w.p.production, retrying.liveKey, { subject: 'Waiting 4' });
      await page
        .getByRole('button', { name: '1 new or changed message — show' })
        .waitFor({ timeout: 15_000 });
    } finally {
      await page.unroute('**/console/api/v1/messages/bulk');
      // The hand-offs failed: back on the ladder.
      for (const id of ids)
        await w.p.ctx.store.run("UPDATE messages SET status = 'queued' WHERE id = ?", id);
    }
  });

  test('bulk release and cancel ask first, naming the count (and, for one message, its recipients); declined, nothing changes; done, the page says what it did', async () => {
    const ids: string[] = [];
    for (const n of [1, 2, 3])
      ids.push(
        await send(w.p.sandbox, bulk.testKey, {
          subject: `Bulk ${n}`,
          to: `person${n}@example.org`,
        }),
      );
    const { page } = await signedIn();
    await page.goto(`/#/messages?project=${bulk.project.id}&environment=sandbox&status=captured`);
    await page.locator('tbody tr').nth(2).waitFor();

    // Everything matching the filter: the count is the server's (a dry run).
    await page.getByText('All matching the filter…').click();
    await page.getByRole('button', { name: 'Release all 3 matching' }).click();
    const all = page.getByRole('dialog', { name: 'Release 3 messages matching the filter?' });
    await all.getByText(/go to their real recipients/).waitFor();
    await all.getByRole('button', { name: 'Leave them as they are' }).click();
    await all.waitFor({ state: 'hidden' });
    for (const id of ids)
      assert.equal(
        expectStatus(await w.owner.get(`/messages/${id}`), 200).status,
        'captured',
        'declined: unchanged',
      );

    // One selected: its recipient named.
    await page.locator(`tr[data-id="${ids[0]}"]`).getByRole('checkbox').check();
    await page.locator('.bulk-bar').getByRole('button', { name: 'Release', exact: true }).click();
    const one = page.getByRole('dialog', { name: 'Release 1 message?' });
    await one.getByText('It is delivered to person1@example.org').waitFor();
    await one.getByRole('button', { name: 'Release 1 message' }).click();
    await page.getByRole('status').getByText('Released 1 message: queued for delivery.').waitFor();
    await page.locator(`tr[data-id="${ids[0]}"] .badge`).first().getByText('queued').waitFor();
    assert.equal(expectStatus(await w.owner.get(`/messages/${ids[0]}`), 200).status, 'queued');

    await page.getByRole('button', { name: 'Cancel all 2 matching' }).click();
    const cancel = page.getByRole('dialog', { name: 'Cancel 2 messages matching the filter?' });
    await cancel.getByRole('button', { name: 'Cancel 2 messages' }).click();
    await page
      .getByRole('status')
      .getByText('Cancelled 2 messages: they will not be sent.')
      .waitFor();
    for (const id of ids.slice(1))
      assert.equal(expectStatus(await w.owner.get(`/messages/${id}`), 200).status, 'cancelled');
  });

  test('pausing and resuming a project ask first; resumed, the page says how many held messages went', async () => {
    const { page } = await signedIn();
    await page.goto('/#/projects');
    const card = page.locator('article.project').filter({ hasText: 'pausing project' });
    await card.getByRole('button', { name: 'Pause' }).click();
    const pause = page.getByRole('dialog', { name: 'Pause pausing project?' });
    await pause.getByRole('button', { name: 'Keep it sending' }).click();
    assert.equal(
      expectStatus(await w.owner.get(`/projects/${pausing.project.id}`), 200).paused,
      false,
      'declined: not paused',
    );
    await card.getByRole('button', { name: 'Pause' }).click();
    await pause.getByRole('button', { name: 'Pause pausing project' }).click();
    await card.getByRole('status').getByText('pausing project is paused').waitFor();
    await card.locator('.badge.status-paused').waitFor();

    const held = await send(w.p.production, pausing.liveKey, { subject: 'Held by the pause' });
    assert.equal(expectStatus(await w.owner.get(`/messages/${held}`), 200).status, 'paused');
    await card.getByRole('button', { name: 'Resume' }).click();
    await page
      .getByRole('dialog', { name: 'Resume pausing project?' })
      .getByRole('button', { name: 'Resume and send the held mail' })
      .click();
    await card
      .getByRole('status')
      .getByText('pausing project is sending again: 1 held message released.')
      .waitFor();
    assert.equal(expectStatus(await w.owner.get(`/messages/${held}`), 200).status, 'queued');
  });

  test('a generated password must be changed at the first sign-in (the API allows nothing else until then); every operator can change theirs', async () => {
    const { page: ownerPage } = await signedIn();
    await ownerPage.goto('/#/operators');
    const form = ownerPage
      .locator('form')
      .filter({ has: ownerPage.getByRole('heading', { name: 'Add an operator' }) });
    await form.getByLabel('Email').fill('fresh@example.com');
    await form.getByLabel('project a').check();
    await form.getByRole('button', { name: 'Add operator' }).click();
    const oneTime = (await ownerPage.getByTestId('secret').textContent())!;
    assert.match(oneTime, /^[A-Za-z0-9]{20}$/);

    // Until changed, the API refuses the rest, with its own code.
    const script = await ConsoleClient.signIn(w.p.console, 'fresh@example.com', oneTime);
    assert.equal(
      expectStatus(await script.get('/session'), 200).operator.must_change_password,
      true,
    );
    expectError(await script.get('/projects'), 403, 'password_change_required');

    const ctx = await newContext(browser, w.p.console);
    contexts.push(ctx);
    const page = await ctx.newPage();
    watch(page);
    await page.goto('/');
    await page.getByLabel('Email').fill('fresh@example.com');
    await page.getByLabel('Password').fill(oneTime);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Choose your password' }).waitFor();
    assert.equal(
      await page.getByRole('navigation', { name: 'Console' }).count(),
      0,
      'nothing else is offered',
    );
    const chosen = 'fresh operator chosen password';
    await page.getByLabel('One-time password').fill(oneTime);
    await page.getByLabel(/^New password(?! again)/).fill(chosen);
    await page.getByLabel('New password again').fill(`${chosen} typo`);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('alert').getByText('The two new passwords differ.').waitFor();
    await page.getByLabel('New password again').fill(chosen);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    expectError(await script.get('/projects'), 401, 'unauthenticated');

    // The account screen, from the header: a second change, by the same form.
    await page.getByRole('link', { name: 'fresh@example.com' }).click();
    await page.getByRole('heading', { name: 'Your account' }).waitFor();
    const again = 'fresh operator second password';
    await page.getByLabel('Current password').fill(chosen);
    await page.getByLabel(/^New password(?! again)/).fill(again);
    await page.getByLabel('New password again').fill(again);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page
      .getByRole('status')
      .getByText('Your password is changed.', { exact: false })
      .waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Email').fill('fresh@example.com');
    await page.getByLabel('Password').fill(again);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Signed in again, on the screen it was on.
    await page.getByRole('heading', { name: 'Your account' }).waitFor();
    assert.equal(
      expectStatus(
        await (await ConsoleClient.signIn(w.p.console, 'fresh@example.com', again)).get(
          '/projects',
        ),
        200,
      ).projects.length,
      1,
    );
  });

  test('when the server cannot be reached a banner says so and the live bar stops saying "up to date"; back, the app recovers by itself', async () => {
    const gate = await TcpGate.start(w.p.console);
    try {
      const { page, problems } = await signedIn(OWNER, { base: gate.url });
      // The requests the app makes while the server is out of reach: this test cuts it off.
      problems.expect(
        /ERR_CONNECTION_REFUSED|ERR_CONNECTION_RESET|ERR_CONNECTION_CLOSED|ERR_EMPTY_RESPONSE|ERR_INCOMPLETE_CHUNKED_ENCODING/,
      );
      await page.goto(`/#/projects/${outage.project.id}/inbox`);
      await page.getByText('No sandbox messages yet.').waitFor();
      await page.locator('.live-bar').getByText('up to date').waitFor({ timeout: 15_000 });

      await gate.shut();
      const banner = page
        .getByRole('alert')
        .filter({ hasText: 'Cannot reach the Postern server.' });
      await banner.waitFor({ timeout: 15_000 });
      assert.doesNotMatch((await page.locator('.live-bar').textContent())!, /up to date/);
      const meanwhile = await send(w.p.sandbox, outage.testKey, {
        subject: 'Sent while the console was cut off',
      });

      await gate.open();
      await banner.waitFor({ state: 'detached', timeout: 20_000 });
      await page.locator(`tr[data-id="${meanwhile}"]`).waitFor({ timeout: 15_000 });
      await page.locator('.live-bar').getByText('up to date').waitFor({ timeout: 15_000 });
    } finally {
      await gate.close();
    }
  });

  test('a session that expires says so on the sign-in form over the screen; signed in again, the screen is as it was, with what was typed', async () => {
    const { page, problems } = await signedIn(LAPSING);
    // The expired session's refusals: this test expires it.
    problems.expect(/answer 401: /, /status of 401/);
    await page.goto(`/#/projects/${lapsing.project.id}/webhooks`);
    await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
    await page.getByLabel('URL').fill(receiver.url('/after-the-lapse'));
    await expireSessions(lapsingId);
    await page.getByRole('button', { name: 'Add endpoint' }).click();

    const dialog = page.getByRole('dialog', { name: 'Sign in again' });
    await dialog
      .getByText(
        /^Your session expired after .* without use\. Sign in again to carry on where you were\.$/,
      )
      .waitFor();
    assert.equal(await dialog.getByLabel('Email').inputValue(), LAPSING);
    await dialog.getByLabel('Password').fill(PASSWORD);
    await dialog.getByRole('button', { name: 'Sign in' }).click();
    await dialog.waitFor({ state: 'detached' });
    assert.equal(
      await page.getByLabel('URL').inputValue(),
      receiver.url('/after-the-lapse'),
      'what was typed is still there',
    );
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByTestId('secret').waitFor();
    await page.getByRole('button', { name: 'I have saved it' }).click();

    // Expired while away, then the page reloaded: the sign-in form says why, and leads back to the same screen.
    await expireSessions(lapsingId);
    await page.reload();
    await page
      .getByRole('status')
      .getByText(/^Your session expired/)
      .waitFor();
    await page.getByLabel('Email').fill(LAPSING);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
    await page.getByText(receiver.url('/after-the-lapse')).first().waitFor();
  });

  test("long lists paginate (50 a page); times show in the browser's time zone with the UTC instant on hover", async () => {
    const messages = Array.from({ length: 55 }, (_, i) =>
      validMessage({ subject: `Bulk ${String(i).padStart(2, '0')}` }),
    );
    const batch = await post(w.p.sandbox, '/v1/send/batch', {
      key: paged.testKey,
      json: { messages },
    });
    assert.equal(batch.status, 207, batch.text);
    const { page } = await signedIn();
    await page.goto(`/#/projects/${paged.project.id}/inbox`);
    const rows = page.locator('tbody tr');
    await rows.nth(49).waitFor();
    assert.equal(await rows.count(), 50);
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.getByText('Page 2').waitFor();
    await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 5);
    assert.equal(await page.getByRole('button', { name: 'Older →' }).isDisabled(), true);

    const time = page.locator('tbody tr time').first();
    const iso = (await time.getAttribute('datetime'))!;
    const d = new Date(iso);
    assert.equal(
      await time.getAttribute('title'),
      d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, ' UTC'),
    );
    const local = new Intl.DateTimeFormat('en-US', {
      timeZone: 'America/New_York',
      year: 'numeric',
      month: 'short',
      day: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    }).format(d);
    assert.equal(await time.textContent(), local);
  });

  test('empty states say what to do next', async () => {
    const { page } = await signedIn();
    for (const [section, text] of [
      ['webhooks', 'No webhook endpoints yet.'],
      ['suppressions', 'No suppressed addresses.'],
      ['dkim', 'No DKIM keys yet.'],
    ] as const) {
      await page.goto(`/#/projects/${empty.project.id}/${section}`);
      await page.getByText(text).waitFor();
    }
    await page.goto(`/#/projects/${empty.project.id}/inbox`);
    await page.getByText('No sandbox messages yet.').waitFor();
    await page.getByText(/Send one with curl/).waitFor();
  });

  test('at 1280 px and at phone width nothing overflows sideways; on a phone the navigation folds behind a Menu button', async () => {
    const { page: desktop } = await signedIn();
    await desktop.goto('/#/messages');
    await desktop.locator('tbody tr').first().waitFor();
    assert.equal(
      await desktop.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      true,
    );

    const { page: phone } = await signedIn(OWNER, { viewport: 'phone' });
    assert.equal(
      await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      true,
      'overview fits',
    );
    assert.equal(await phone.locator('#nav').isVisible(), false);
    await phone.getByRole('button', { name: 'Menu' }).click();
    await phone.getByRole('link', { name: 'Messages', exact: true }).click();
    await phone.getByRole('heading', { name: 'Messages' }).waitFor();
    await phone.locator('tbody tr').first().waitFor();
    assert.equal(await phone.locator('#nav').isVisible(), false, 'the menu closes after a choice');
    assert.equal(
      await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      true,
      'messages fit',
    );
  });
});
