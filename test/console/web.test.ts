/**
 * The web console in a real browser (Debian's chromium, headless, driven by playwright-core)
 * against a real server: sign-in, the sandbox inbox's live updates, the HTML preview that never
 * runs a script, releasing messages, keys shown once, webhooks' test button and secret
 * rotation, what a member may see, and the quality points (keyboard, phone width, empty
 * states, pagination, local times, no layout shift). One browser for the file, a context each.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { consoleWorld, PASSWORD, type ConsoleWorld } from '../support/console.js';
import { launchBrowser, newContext, signIn } from '../support/browser.js';
import { createProjectWithKeys, post, validMessage, type ProjectWithKeys } from '../support/postern.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const OWNER = 'owner@example.com';
const MEMBER = 'member@example.com';

async function send(base: string, key: string, overrides: Record<string, unknown> = {}): Promise<string> {
  const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
  assert.equal(res.status, 202, res.text);
  return res.body.id as string;
}

describe('web console in a browser', () => {
  let w: ConsoleWorld;
  let browser: Browser;
  let receiver: WebhookReceiver;
  let inbox: ProjectWithKeys;
  let live: ProjectWithKeys;
  let empty: ProjectWithKeys;
  let paged: ProjectWithKeys;
  const contexts: BrowserContext[] = [];

  /** A page in a fresh context (own cookies), signed in as `email`. */
  async function signedIn(email = OWNER, viewport: 'desktop' | 'phone' = 'desktop'): Promise<Page> {
    const ctx = await newContext(browser, w.p.console, viewport);
    contexts.push(ctx);
    const page = await ctx.newPage();
    await signIn(page, email, PASSWORD);
    return page;
  }

  before(async () => {
    receiver = await WebhookReceiver.start();
    w = await consoleWorld({ config: { webhooks: { allow_private_targets: true, enabled: false }, node: { id: 'web-node' } } });
    // Projects the tests use alone (the app loads the project list at sign-in).
    inbox = await createProjectWithKeys(w.p.ctx, 'inbox project');
    live = await createProjectWithKeys(w.p.ctx, 'live project');
    empty = await createProjectWithKeys(w.p.ctx, 'empty project');
    paged = await createProjectWithKeys(w.p.ctx, 'paged project');
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await w?.p.close();
    await receiver?.close();
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
    assert.match(api.headers.get('content-security-policy')!, /default-src 'none'.*frame-ancestors 'none'/);
    assert.equal(api.headers.get('referrer-policy'), 'no-referrer');
  });

  test('sign-in by keyboard alone: a wrong password shows the API\'s message; the right one opens the overview with its 24 h chart and its Nodes panel', async () => {
    const ctx = await newContext(browser, w.p.console);
    contexts.push(ctx);
    const page = await ctx.newPage();
    await page.goto('/');
    // The email field takes the focus: type, Tab, type, Enter.
    await page.waitForFunction(() => document.activeElement?.getAttribute('name') === 'email');
    await page.keyboard.type(OWNER);
    await page.keyboard.press('Tab');
    await page.keyboard.type('not the password');
    await page.keyboard.press('Enter');
    await page.getByRole('alert').getByText(/email or password/i).waitFor();
    await page.getByLabel('Password').fill(PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('img', { name: /per hour over the last 24 hours/ }).locator('canvas').waitFor();
    // The Nodes panel names this server, up.
    await page.getByRole('region', { name: 'Nodes' }).getByRole('row').filter({ hasText: 'web-node' }).filter({ hasText: 'up' }).waitFor();
    // Keyboard: the navigation's links are reachable with Tab and open their screen with Enter.
    await page.getByRole('link', { name: 'Messages', exact: true }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Messages' }).waitFor();
  });

  test('a message sent to the sandbox API appears in the open inbox without a reload, with the sandbox marker; opened, its HTML shows in the preview; released, its status changes', async () => {
    const page = await signedIn();
    await page.goto(`/#/projects/${inbox.project.id}/inbox`);
    await page.getByText('No sandbox messages yet.').waitFor();
    // The empty state tells what to do next: a curl to this server's sandbox listener.
    assert.match(await page.locator('pre.code').textContent() ?? '', new RegExp(`curl -X POST ${w.p.sandbox}/v1/send`));
    await page.evaluate(() => ((window as unknown as { notReloaded: boolean }).notReloaded = true));

    const id = await send(w.p.sandbox, inbox.testKey, { subject: 'Welcome aboard', html: '<h1 id="greeting">Welcome, Ann</h1>' });
    const row = page.locator(`tr[data-id="${id}"]`);
    await row.waitFor();
    assert.equal(await row.locator('.badge.sandbox').textContent(), 'sandbox');
    assert.equal(await row.locator('.badge').first().textContent(), 'captured');
    assert.equal(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded), true, 'the page was not reloaded');

    await row.getByRole('link', { name: 'Welcome aboard' }).click();
    await page.getByRole('heading', { name: 'Welcome aboard' }).waitFor();
    const preview = page.frameLocator('iframe.preview');
    assert.equal(await preview.locator('#greeting').textContent(), 'Welcome, Ann');
    assert.equal(await page.locator('iframe.preview').getAttribute('sandbox'), 'allow-popups allow-popups-to-escape-sandbox');

    await page.getByRole('button', { name: 'Release' }).click();
    await page.locator('.summary-line .badge').first().getByText('queued').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Release' }).isDisabled(), true);
  });

  test('a <script> in a message\'s HTML never runs: not in the console preview, not in the public viewer', async () => {
    const html =
      '<p id="shown">Shown</p>' +
      '<script>document.body.setAttribute("data-ran","1");fetch("/pwned-script");alert("pwned");parent.document.title="pwned"</script>' +
      '<img src="data:," onload="fetch(\'/pwned-onload\')" onerror="fetch(\'/pwned-onerror\')">';
    const id = await send(w.p.production, w.a.liveKey, { subject: 'Scripted', html });
    const page = await signedIn();
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
    await (await (await page.locator('iframe.preview').elementHandle())!.contentFrame())!.waitForLoadState('load');
    assert.equal(await preview.locator('body').getAttribute('data-ran'), null);
    assert.notEqual(await page.title(), 'pwned');

    // The public viewer, opened from the share action.
    await page.getByRole('button', { name: 'Share' }).click();
    const url = await page.locator('.share-link a').getAttribute('href');
    assert.ok(url?.startsWith(`${w.p.production}/view/${id}/`), url ?? '');
    const viewer = await page.context().newPage();
    viewer.on('dialog', (d) => {
      pwned.push(`viewer dialog: ${d.message()}`);
      void d.dismiss();
    });
    await viewer.goto(url!);
    await viewer.getByRole('heading', { name: 'Scripted' }).waitFor();
    const body = viewer.frameLocator('iframe');
    assert.equal(await body.locator('#shown').textContent(), 'Shown');
    await (await (await viewer.locator('iframe').elementHandle())!.contentFrame())!.waitForLoadState('load');
    assert.equal(await body.locator('body').getAttribute('data-ran'), null);
    assert.equal(await viewer.title(), 'Scripted');
    assert.deepEqual(pwned, []);
  });

  test('a paused production message is released from its page, and its status changes', async () => {
    const id = await send(w.p.production, w.a.liveKey, { subject: 'Held for review', paused: true });
    const page = await signedIn();
    await page.goto(`/#/messages/${id}`);
    const status = page.locator('.summary-line .badge').first();
    await status.getByText('paused').waitFor();
    assert.equal(await page.locator('.badge.sandbox').count(), 0, 'production mail has no sandbox marker');
    await page.getByRole('button', { name: 'Release' }).click();
    await status.getByText('queued').waitFor();
    // The audit log (owners) has the release.
    await page.goto('/#/audit');
    await page.getByRole('cell', { name: 'message.release' }).first().waitFor();
  });

  test('a new API key is shown once, with a copy button, then only its hint', async () => {
    const page = await signedIn();
    await page.goto(`/#/projects/${w.a.project.id}/keys`);
    await page.locator('table').first().waitFor();
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
    await page.getByRole('cell', { name: new RegExp(hint) }).first().waitFor();
    await page.reload();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await page.getByRole('cell', { name: new RegExp(hint) }).first().waitFor();
    assert.ok(!(await page.content()).includes(key), 'the full key is never shown again');
  });

  test('webhooks: the test button\'s delivery shows in the endpoint\'s log; rotating the secret shows the new one once', async () => {
    const page = await signedIn(MEMBER);
    page.on('dialog', (d) => void d.accept());
    await page.goto(`/#/projects/${w.a.project.id}/webhooks`);
    await page.getByText('No webhook endpoints yet.').waitFor();
    await page.getByLabel('URL').fill(receiver.url('/browser-hook'));
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const first = (await page.getByTestId('secret').textContent())!;
    assert.match(first, /^whsec_/);
    await page.getByRole('button', { name: 'I have saved it' }).click();

    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.getByRole('status').getByText(/delivered \(HTTP 200\)/).waitFor();
    const log = page.locator('tbody.attempts tr');
    await log.first().waitFor();
    assert.match((await log.first().textContent())!, /webhook\.test.*200 delivered/);
    assert.equal(receiver.received.filter((r) => r.path === '/browser-hook').length, 1);

    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = (await page.getByTestId('secret').textContent())!;
    assert.match(rotated, /^whsec_/);
    assert.notEqual(rotated, first);
    await page.getByText(/previous secret valid until/).waitFor();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    assert.ok(!(await page.content()).includes(rotated));
  });

  test('providers: an owner runs the connection check and sees its failure, and changes an account\'s priority and free quota', async () => {
    const page = await signedIn();
    await page.goto(`/#/projects/${w.a.project.id}/providers`);
    const row = page.locator('tbody tr').first();
    await row.waitFor();
    await row.getByRole('button', { name: 'Check connection' }).click();
    // The test world's relay is 127.0.0.1:9, where nothing listens.
    await row.getByText(/Failed at connect/).waitFor();
    await row.getByLabel('Priority', { exact: true }).fill('7');
    await row.getByLabel(/Free quota/).fill('3000');
    // Saved, the list is read again.
    await Promise.all([page.waitForResponse((r) => r.url().endsWith(`/projects/${w.a.project.id}/providers`)), row.getByRole('button', { name: 'Save' }).click()]);
    const listed = await w.owner.get(`/projects/${w.a.project.id}/providers`);
    assert.deepEqual(listed.body.providers.map((p: { priority: number; free_quota: number | null }) => [p.priority, p.free_quota]), [[7, 3000]]);
  });

  test('a member sees only their projects\' messages; another project\'s message is "not found"', async () => {
    const mine = await send(w.p.production, w.a.liveKey, { subject: 'For the member' });
    const theirs = await send(w.p.production, w.b.liveKey, { subject: 'Project b only' });
    const page = await signedIn(MEMBER);
    const picker = page.locator('.project-picker select');
    await picker.locator('option', { hasText: 'project a' }).waitFor({ state: 'attached' });
    assert.deepEqual(await picker.locator('option').allTextContents(), ['project a']);
    assert.equal(await page.getByRole('link', { name: 'Operators' }).count(), 0);
    await page.goto('/#/messages');
    await page.locator(`tr[data-id="${mine}"]`).waitFor();
    assert.equal(await page.locator(`tr[data-id="${theirs}"]`).count(), 0);
    assert.equal(await page.getByText('Project b only').count(), 0);
    await page.goto(`/#/messages/${theirs}`);
    await page.getByRole('alert').getByText(/not found/i).waitFor();
    assert.equal(await page.getByText('Project b only').count(), 0);
  });

  test('live updates never move the rows on screen: a new message is counted in the live bar until shown; a status change is made in place', async () => {
    const older = await send(w.p.sandbox, live.testKey, { subject: 'First' });
    await send(w.p.sandbox, live.testKey, { subject: 'Second' });
    const page = await signedIn();
    await page.goto(`/#/projects/${live.project.id}/inbox`);
    const rows = page.locator('tbody tr');
    await rows.nth(1).waitFor();
    const boxes = async () => Promise.all([0, 1].map(async (i) => (await rows.nth(i).boundingBox())!));
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

  test('long lists paginate (50 a page); times show in the browser\'s time zone with the UTC instant on hover', async () => {
    const messages = Array.from({ length: 55 }, (_, i) => validMessage({ subject: `Bulk ${String(i).padStart(2, '0')}` }));
    const batch = await post(w.p.sandbox, '/v1/send/batch', { key: paged.testKey, json: { messages } });
    assert.equal(batch.status, 207, batch.text);
    const page = await signedIn();
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
    assert.equal(await time.getAttribute('title'), d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'));
    const local = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' }).format(d);
    assert.equal(await time.textContent(), local);
  });

  test('empty states say what to do next', async () => {
    const page = await signedIn();
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
    const desktop = await signedIn();
    await desktop.goto('/#/messages');
    await desktop.locator('tbody tr').first().waitFor();
    assert.equal(await desktop.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true);

    const phone = await signedIn(OWNER, 'phone');
    assert.equal(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'overview fits');
    assert.equal(await phone.locator('#nav').isVisible(), false);
    await phone.getByRole('button', { name: 'Menu' }).click();
    await phone.getByRole('link', { name: 'Messages', exact: true }).click();
    await phone.getByRole('heading', { name: 'Messages' }).waitFor();
    await phone.locator('tbody tr').first().waitFor();
    assert.equal(await phone.locator('#nav').isVisible(), false, 'the menu closes after a choice');
    assert.equal(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'messages fit');
  });
});
