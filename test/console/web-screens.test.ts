/**
 * The console's screens finished, in a real browser (Debian's chromium, headless, driven by
 * playwright-core) against a real server: the message list (a result count, retrying rows with
 * their attempts and last error, several statuses at once, the page in the address so Back
 * returns to it, "all matching" actions that say how many, From by display name); the overview
 * (hourly bars with each series' total, deferred hand-offs); phone width (stacked rows, folding
 * filters) and dark mode; a title per screen and tabs worked by the arrow keys; the settings
 * screens (named keys with revoked ones hidden, the webhook log's bodies, answers and
 * redelivery, a refused URL in words, the audit log by operator email, plans chosen from the
 * configured ones and bytes in human units); the public viewer (a recipient's status words,
 * links listed and revoked). Then every screen through axe-core and the keyboard's focus ring,
 * and the screenshots the README shows (1440 × 900 and 390 × 844, light and dark). One server
 * and one browser for the file; every page's console and the app's own requests are watched.
 */
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  axeViolations,
  endTestTabs,
  focusWithoutRing,
  launchBrowser,
  newContext,
  PageProblems,
  type StorageState,
  signIn,
  testOutputDir,
} from '../support/browser.js';
import {
  type ConsoleWorld,
  consoleWorld,
  expectStatus,
  operatorAccount,
  PASSWORD,
} from '../support/console.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  repoRoot,
  validMessage,
} from '../support/postern.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const OWNER = 'owner@example.com';
const MEMBER = 'member@example.com';

async function send(
  base: string,
  key: string,
  overrides: Record<string, unknown> = {},
): Promise<string> {
  const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
  assert.equal(res.status, 202, res.text);
  return res.body.id as string;
}

type Viewport = 'desktop' | 'phone' | { width: number; height: number };

describe('web console screens in a browser', () => {
  let w: ConsoleWorld;
  let browser: Browser;
  let receiver: WebhookReceiver;
  let listing: ProjectWithKeys;
  let shop: ProjectWithKeys;
  let settings: ProjectWithKeys;
  /** The message the screenshots and the tabs test open. */
  let showcase: string;
  const contexts: BrowserContext[] = [];
  const watched: PageProblems[] = [];
  const signedInOnce = new Map<string, StorageState>();

  function watch(page: Page, origins = [w.p.console]): PageProblems {
    const problems = new PageProblems(page, origins);
    watched.push(problems);
    return problems;
  }

  /** A page in a fresh context signed in as `email` (the first sign-in's session kept for the others), watched. */
  async function signedIn(
    email = OWNER,
    opts: { viewport?: Viewport; scheme?: 'light' | 'dark' } = {},
  ): Promise<{ page: Page; problems: PageProblems }> {
    const kept = signedInOnce.get(email);
    const ctx = await newContext(browser, w.p.console, opts.viewport, kept, opts.scheme);
    contexts.push(ctx);
    const page = await ctx.newPage();
    const problems = watch(page);
    if (kept) {
      await page.goto('/');
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
    } else {
      await signIn(page, email, PASSWORD);
      signedInOnce.set(email, await ctx.storageState());
    }
    return { page, problems };
  }

  before(async () => {
    receiver = await WebhookReceiver.start();
    w = await consoleWorld({
      config: {
        webhooks: { allow_private_targets: true, enabled: false },
        node: { id: 'screens-node' },
      },
    });
    listing = await createProjectWithKeys(w.p.ctx, 'listing project');
    shop = await createProjectWithKeys(w.p.ctx, 'shop');
    settings = await createProjectWithKeys(w.p.ctx, 'settings project');
    await operatorAccount(w.p.ctx, 'auditor@example.com', 'owner');
    showcase = await send(w.p.production, shop.liveKey, {
      subject: 'Your order #1042 has shipped',
      from: 'Shop <orders@shop.example>',
      to: 'Ann Example <ann@example.org>',
      html: '<h1 style="font-family:sans-serif">Your order is on its way</h1><p style="font-family:sans-serif">Order #1042: 2 items, arriving Thursday.</p>',
      text: 'Your order is on its way. Order #1042: 2 items, arriving Thursday.',
      tags: ['orders'],
      category: 'shipping',
    });
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
  });

  test('messages: a result count; several statuses at once; a retrying message shows its attempts and last error; From finds display names; "all matching" says how many; the page is in the address and Back returns to it', async () => {
    const batch = await post(w.p.production, '/v1/send/batch', {
      key: listing.liveKey,
      json: {
        messages: Array.from({ length: 52 }, (_, i) =>
          validMessage({ subject: `Listed ${String(i).padStart(2, '0')}` }),
        ),
      },
    });
    assert.equal(batch.status, 207, batch.text);
    const held = [
      await send(w.p.production, listing.liveKey, { subject: 'Held one', paused: true }),
      await send(w.p.production, listing.liveKey, { subject: 'Held two', paused: true }),
    ];
    const named = await send(w.p.production, listing.liveKey, {
      subject: 'From a person',
      from: 'Zed Sender <zed@example.com>',
    });
    const retried = await send(w.p.production, listing.liveKey, { subject: 'Greylisted one' });
    await w.p.ctx.store.run(
      "UPDATE messages SET attempts = 2, next_attempt_at = ?, last_error = 'smtp: 451 4.7.1 greylisted, try later' WHERE id = ?",
      Date.now() + 3600_000,
      retried,
    );
    const { page } = await signedIn();

    await page.goto(`/#/messages?project=${listing.project.id}`);
    await page.locator('.result-count').getByText('56 messages match this filter').waitFor();
    assert.equal(await page.locator('tbody tr').count(), 50);

    // The retrying message: not a fresh "queued", its attempts and last error shown.
    const retryRow = page.locator(`tr[data-id="${retried}"]`);
    assert.equal(await retryRow.locator('.badge').first().textContent(), 'retrying');
    assert.match(
      (await retryRow.locator('.retry-note').textContent())!,
      /^2 attempts: smtp: 451 4\.7\.1 greylisted, try later$/,
    );
    // From: the display name with the address.
    assert.equal(
      await page.locator(`tr[data-id="${named}"] .c-from`).textContent(),
      'Zed Sender <zed@example.com>',
    );

    // Page 2 is in the address; a message opened from it, Back returns to page 2.
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.waitForURL(/cursor=.*page=2/);
    await page.locator('.pager').getByText('Page 2').waitFor();
    await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 6);
    const page2 = page.url();
    const firstOnPage2 = await page.locator('tbody tr').first().getAttribute('data-id');
    await page.locator('tbody tr').first().getByRole('link').click();
    await page.waitForURL(new RegExp(`#/messages/${firstOnPage2!.replace('.', '\\.')}$`));
    await page.goBack();
    await page.waitForURL(page2);
    await page.locator(`tbody tr[data-id="${firstOnPage2}"]`).waitFor();
    assert.equal(await page.locator('tbody tr').count(), 6);
    await page.reload();
    await page.locator(`tbody tr[data-id="${firstOnPage2}"]`).waitFor();
    assert.equal(await page.title(), 'Messages, page 2 — Postern');
    await page.getByRole('button', { name: '← Newest' }).click();
    await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 50);

    // Several statuses at once: paused and queued, ticked in the status picker.
    await page.locator('fieldset.status-pick summary').click();
    await page.getByRole('checkbox', { name: 'paused', exact: true }).check();
    await page.getByRole('checkbox', { name: 'queued', exact: true }).check();
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/status=queued%2Cpaused/);
    await page.locator('.result-count').getByText('56 messages match this filter').waitFor();
    await page.locator('fieldset.status-pick summary').getByText('queued, paused').waitFor();
    // Only paused: two.
    await page.goto(`/#/messages?project=${listing.project.id}&status=paused`);
    await page.locator('.result-count').getByText('2 messages match this filter').waitFor();
    assert.deepEqual(
      (
        await page
          .locator('tbody tr')
          .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id')))
      ).sort(),
      [...held].sort(),
    );

    // "All matching" says how many each action touches (the server's dry runs), before anything is done.
    await page.goto(`/#/messages?project=${listing.project.id}&status=paused,queued`);
    await page.locator('.result-count').getByText('56 messages match this filter').waitFor();
    await page.getByText('All matching the filter…').click();
    await page.getByRole('button', { name: 'Release all 2 matching' }).waitFor();
    await page.getByRole('button', { name: 'Cancel all 56 matching' }).waitFor();
    await page.getByRole('button', { name: 'Retry now all 1 matching' }).waitFor();
    await page.getByRole('button', { name: 'Release all 2 matching' }).click();
    await page
      .getByRole('dialog', { name: 'Release 2 messages matching the filter?' })
      .getByRole('button', { name: 'Release 2 messages' })
      .click();
    await page.getByRole('status').getByText('Released 2 messages: queued for delivery.').waitFor();
    await page.getByRole('button', { name: 'Release all 0 matching' }).waitFor();
    assert.equal(
      await page.getByRole('button', { name: 'Release all 0 matching' }).isDisabled(),
      true,
    );

    // From by display name, typed in the filter.
    await page.goto(`/#/messages?project=${listing.project.id}`);
    await page.getByRole('textbox', { name: 'From', exact: true }).fill('zed send');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('.result-count').getByText('1 message matches this filter').waitFor();
    assert.deepEqual(
      await page
        .locator('tbody tr')
        .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id'))),
      [named],
    );
  });

  test('overview: hourly bars for every series with its 24 h total, deferred hand-offs among them, and the failed hand-offs of a failing provider counted', async () => {
    const account = (await w.p.ctx.store.get<{ id: string }>(
      'SELECT id FROM provider_accounts WHERE project_id = ? AND detached_at IS NULL',
      shop.project.id,
    ))!;
    const now = Date.now();
    for (let i = 0; i < 10; i++) {
      await w.p.ctx.store.run(
        'INSERT INTO attempts (message_id, provider_account_id, provider_slug, started_at, finished_at, outcome, reply) VALUES (?, ?, ?, ?, ?, ?, ?)',
        showcase,
        account.id,
        'smtp',
        now - 2000,
        now - 1000,
        'temporary',
        'smtp: 421 4.7.0 too many connections',
      );
    }
    const figures = expectStatus(await w.owner.get('/overview'), 200);
    const total = (key: string) =>
      figures.hourly.reduce((n: number, h: any) => n + h.counts[key], 0);
    assert.equal(total('deferred'), 10);
    const { page } = await signedIn();
    await page.getByRole('button', { name: 'Refresh' }).click();
    const legend = page.getByRole('list', { name: 'Totals over the last 24 hours' });
    for (const [label, key] of [
      ['Accepted', 'accepted'],
      ['Sent', 'sent'],
      ['Delivered', 'delivered'],
      ['Deferred', 'deferred'],
      ['Bounced', 'bounced'],
      ['Failed', 'failed'],
    ] as const) {
      await legend
        .getByRole('listitem')
        .filter({ hasText: new RegExp(`^\\s*${label} ${total(key).toLocaleString('en-US')}$`) })
        .waitFor();
    }
    // Bars: the deferred series fills a block of its own colour in the current hour (a line through
    // 24 points would be a stroke a few pixels wide, and a series the chart did not have drew nothing).
    const canvas = page
      .getByRole('img', { name: /per hour over the last 24 hours/ })
      .locator('canvas');
    await canvas.waitFor();
    const filled = await canvas.evaluate((c: HTMLCanvasElement) => {
      const data = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let deferred = 0;
      let accepted = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i] === 0xc9 && data[i + 1] === 0xa1 && data[i + 2] === 0x00) deferred++;
        if (data[i] === 0x6b && data[i + 1] === 0x7c && data[i + 2] === 0x93) accepted++;
      }
      return { deferred, accepted };
    });
    assert.ok(filled.deferred > 40, `deferred bar pixels: ${filled.deferred}`);
    assert.ok(filled.accepted > 40, `accepted bar pixels: ${filled.accepted}`);
    // The figures per hour, as a table too.
    await page.getByText('The figures per hour').click();
    const current = page
      .getByRole('region', { name: 'Messages per hour' })
      .locator('tbody tr')
      .last();
    const headers = await page
      .getByRole('region', { name: 'Messages per hour' })
      .locator('thead th')
      .allTextContents();
    const cells = await current.locator('td').allTextContents();
    assert.equal(cells[headers.indexOf('Deferred')], '10', cells.join(' | '));
    // The failing provider: its failed hand-offs are counted where providers are shown.
    const row = page
      .getByRole('region', { name: 'Provider health' })
      .locator('tr')
      .filter({ hasText: account.id });
    assert.equal(
      (
        await page
          .getByRole('region', { name: 'Provider health' })
          .locator('thead th')
          .allTextContents()
      )[2],
      'Failed hand-offs',
    );
    assert.equal(await row.locator('td').nth(2).textContent(), '10');
    await row.getByText('smtp: 421 4.7.0 too many connections').waitFor();
  });

  test('phone width (390 px): the message list is stacked rows with subject, to, status and time in view; the filters fold away until opened', async () => {
    const { page } = await signedIn(OWNER, { viewport: { width: 390, height: 844 } });
    await page.goto(`/#/messages?project=${shop.project.id}`);
    const row = page.locator(`tr[data-id="${showcase}"]`);
    await row.waitFor();
    for (const cell of ['.c-subject', '.c-to', '.c-status', '.c-time']) {
      const box = (await row.locator(cell).boundingBox())!;
      assert.ok(box && box.width > 0 && box.height > 0, `${cell} shown`);
      assert.ok(
        box.x >= 0 && box.x + box.width <= 390,
        `${cell} within the screen: ${JSON.stringify(box)}`,
      );
    }
    assert.equal(await row.locator('.c-subject').textContent(), 'Your order #1042 has shipped');
    // Stacked: the subject above the recipient, the status below them.
    const [subject, to, status] = await Promise.all(
      ['.c-subject', '.c-to', '.c-status'].map(
        async (c) => (await row.locator(c).boundingBox())!.y,
      ),
    );
    assert.ok(subject < to && to < status, `${subject} < ${to} < ${status}`);
    assert.equal(
      await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      true,
      'nothing overflows sideways',
    );
    // The filters: folded, then opened.
    assert.equal(await page.getByLabel('Subject contains').isVisible(), false);
    await page.locator('.filter-box > summary').click();
    await page.getByLabel('Subject contains').waitFor();
    assert.equal(
      await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      true,
    );
  });

  test("dark mode follows the system's colour scheme; every screen has a title of its own; the message's tabs follow the arrow keys (WAI-ARIA tabs)", async () => {
    const luminance = (page: Page) =>
      page.evaluate(() => {
        const [r, g, b] = getComputedStyle(document.documentElement)
          .backgroundColor.match(/\d+/g)!
          .map(Number);
        return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
      });
    const { page: dark } = await signedIn(OWNER, { scheme: 'dark' });
    assert.ok((await luminance(dark)) < 0.2, 'dark background');
    const { page } = await signedIn();
    assert.ok((await luminance(page)) > 0.8, 'light background');

    for (const [route, title] of [
      ['/#/overview', 'Overview — Postern'],
      ['/#/messages', 'Messages — Postern'],
      [`/#/projects/${shop.project.id}/inbox`, 'Sandbox inbox — shop — Postern'],
      [`/#/projects/${shop.project.id}/keys`, 'API keys — shop — Postern'],
      [`/#/projects/${shop.project.id}/providers`, 'Providers — shop — Postern'],
      [`/#/projects/${shop.project.id}/webhooks`, 'Webhooks — shop — Postern'],
      [`/#/projects/${shop.project.id}/suppressions`, 'Suppressions — shop — Postern'],
      [`/#/projects/${shop.project.id}/dkim`, 'DKIM — shop — Postern'],
      ['/#/projects', 'Projects — Postern'],
      ['/#/operators', 'Operators — Postern'],
      ['/#/audit', 'Audit log — Postern'],
      ['/#/account', 'Your account — Postern'],
      [`/#/messages/${showcase}`, 'Your order #1042 has shipped — Postern'],
    ] as const) {
      await page.goto(route);
      await page.waitForFunction((t) => document.title === t, title);
    }

    // The tabs: one tab stop; arrows move and select, Home and End go to the ends.
    const tabs = page.getByRole('tablist', { name: 'Message parts' });
    const selected = () => tabs.locator('[aria-selected="true"]').textContent();
    await tabs.getByRole('tab', { name: 'Preview' }).focus();
    assert.deepEqual(
      await tabs.getByRole('tab').evaluateAll((t) => t.map((e) => e.getAttribute('tabindex'))),
      ['0', '-1', '-1', '-1', '-1', '-1', '-1'],
    );
    await page.keyboard.press('ArrowRight');
    assert.equal(await selected(), 'Text');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Text');
    await page
      .getByRole('tabpanel', { name: 'Text' })
      .getByText(/Order #1042: 2 items/)
      .waitFor();
    await page.keyboard.press('End');
    assert.equal(await selected(), 'Details');
    await page.keyboard.press('ArrowRight');
    assert.equal(await selected(), 'Preview', 'wraps to the first');
    await page.keyboard.press('ArrowLeft');
    assert.equal(await selected(), 'Details', 'and back to the last');
    await page.keyboard.press('Home');
    assert.equal(await selected(), 'Preview');
    assert.equal(
      await tabs.getByRole('tab', { name: 'Preview' }).getAttribute('aria-controls'),
      await page.getByRole('tabpanel').getAttribute('id'),
    );
  });

  test('API keys have a name; revoked keys are hidden until asked for', async () => {
    const { page } = await signedIn(MEMBER);
    await page.goto(`/#/projects/${w.a.project.id}/keys`);
    await page.locator('table').first().waitFor();
    await page.getByLabel(/^Name/).fill('billing worker');
    await page.getByLabel(/^Mode/).selectOption('live');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.locator('.shown-once').getByText('New live key "billing worker"').waitFor();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    const row = page
      .getByRole('region', { name: 'API keys' })
      .locator('tr')
      .filter({ hasText: 'billing worker' });
    await row.waitFor();
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page
      .getByRole('dialog', { name: /^Revoke "billing worker"/ })
      .getByRole('button', { name: 'Revoke the key' })
      .click();
    await row.waitFor({ state: 'detached' });
    const show = page.getByRole('checkbox', { name: /^Show revoked keys \(1\)$/ });
    await show.check();
    await row.getByText('revoked').waitFor();
    await show.uncheck();
    await row.waitFor({ state: 'detached' });
  });

  test("providers: the vendor's name beside the slug, an account label, the feedback URL shown once with its secret then masked, and credentials edited in place (a new secret replaces the old and is never shown)", async () => {
    // A project of its own: nothing is ever sent through this account (its key is not a real one).
    const feedbackOnly = await createProjectWithKeys(w.p.ctx, 'feedback project', 'pro', {
      provider: false,
    });
    const { page } = await signedIn(OWNER);
    await page.goto(`/#/projects/${feedbackOnly.project.id}/providers`);
    await page.getByRole('heading', { name: 'Providers' }).waitFor();
    await page.locator('select[name=slug]').selectOption('provider-e-api');
    assert.equal(
      await page.locator('select[name=slug]').locator('option:checked').textContent(),
      'provider-e-api (Postmark API)',
    );
    await page.getByLabel(/^Server token/).fill('pm-server-token-1');
    await page.getByLabel(/^Webhook secret/).fill('first-hook-secret');
    await page.getByLabel(/^Label/).fill('transactional, EU');
    await page.getByRole('button', { name: 'Attach' }).click();
    // Shown once, with the secret in it: the URL to paste into Postmark's webhook settings.
    const once = page.locator('.shown-once');
    await once.getByText(/Feedback URL of Postmark API "transactional, EU"/).waitFor();
    const firstUrl = (await once.getByTestId('secret').textContent())!;
    assert.match(firstUrl, /\/v1\/feedback\/[^/]+\/first-hook-secret$/);
    await page.getByRole('button', { name: 'I have saved it' }).click();
    const row = page
      .getByRole('region', { name: 'Provider accounts' })
      .locator('tr')
      .filter({ hasText: 'transactional, EU' });
    await row.getByText('Postmark API').waitFor();
    await row.getByText('provider-e-api').waitFor();
    assert.equal(
      await row.getByTestId('feedback-url').textContent(),
      firstUrl.replace(/first-hook-secret$/, '••••••••'),
    );
    assert.ok(
      !(await page.content()).includes('first-hook-secret'),
      'the secret is gone from the page once saved',
    );
    const accountId = firstUrl.split('/').slice(-2)[0];
    // The URL shown works: Postmark's notification with the secret is taken.
    const feedbackPath = new URL(firstUrl).pathname;
    assert.equal(
      (await post(w.p.production, feedbackPath, { json: { RecordType: 'Open' } })).status,
      200,
    );

    // Edit: a new label, a new API key and a new webhook secret.
    await row.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: `Edit Postmark API account ${accountId}` });
    assert.equal(
      await edit.getByLabel(/^Server token \(new\)/).inputValue(),
      '',
      'a secret is never filled in',
    );
    await edit.getByLabel(/^Label/).fill('transactional');
    await edit.getByLabel(/^Server token \(new\)/).fill('pm-server-token-2');
    await edit.getByLabel(/^Webhook secret \(new\)/).fill('second-hook-secret');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await once.getByText(/Feedback URL of Postmark API "transactional"/).waitFor();
    assert.equal(
      await once.getByTestId('secret').textContent(),
      firstUrl.replace(/first-hook-secret$/, 'second-hook-secret'),
    );
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await edit.waitFor({ state: 'detached' });
    const renamed = page
      .getByRole('region', { name: 'Provider accounts' })
      .locator('tr')
      .filter({
        has: page.getByTestId('provider-label').getByText('transactional', { exact: true }),
      });
    await renamed
      .getByTestId('feedback-url')
      .getByText(/••••••••$/)
      .waitFor();
    // The new secret replaced the old: the old URL is refused, the new one taken; the account sends with the new key.
    assert.equal(
      (await post(w.p.production, feedbackPath, { json: { RecordType: 'Open' } })).status,
      401,
    );
    assert.equal(
      (
        await post(
          w.p.production,
          feedbackPath.replace(/first-hook-secret$/, 'second-hook-secret'),
          { json: { RecordType: 'Open' } },
        )
      ).status,
      200,
    );
    const stored = (await w.p.ctx.store.get<{ secrets: string; settings: string }>(
      'SELECT secrets, settings FROM provider_accounts WHERE id = ?',
      accountId,
    ))!;
    assert.deepEqual(JSON.parse(stored.secrets), {
      api_key: 'pm-server-token-2',
      webhook_secret: 'second-hook-secret',
    });
    assert.equal(JSON.parse(stored.settings).label, 'transactional');
    const audited = expectStatus(await w.owner.get('/audit?action=provider.update'), 200);
    assert.ok(
      !JSON.stringify(audited).includes('second-hook-secret') &&
        !JSON.stringify(audited).includes('pm-server-token-2'),
      'the audit log names the replaced secrets, never their values',
    );
  });

  test('suppressions: an address added in the console stops mail to it; search finds it, the CSV export has it, and removed it is sent to again', async () => {
    const { page } = await signedIn(OWNER);
    await page.goto(`/#/projects/${settings.project.id}/suppressions`);
    await page.getByRole('heading', { name: 'Suppressions' }).waitFor();
    await page.getByLabel('Suppress an address').fill('Blocked.Person@Example.org');
    await page.getByLabel(/^Reason/).fill('asked by phone');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    const table = page.getByRole('region', { name: 'Suppressed addresses' });
    const row = table.locator('tr').filter({ hasText: 'asked by phone' });
    await row.waitFor();
    // Mail to it is not sent: the send API refuses it, naming the list.
    const refused = await post(w.p.production, '/v1/send', {
      key: settings.liveKey,
      json: validMessage({ to: 'blocked.person@example.org', subject: 'to a suppressed address' }),
    });
    assert.deepEqual([refused.status, refused.body.error?.code], [422, 'suppressed_recipient']);
    await page.getByRole('search').getByLabel('Search').fill('blocked');
    await page.getByRole('search').getByRole('button', { name: 'Search' }).click();
    await row.waitFor();
    assert.equal(await table.locator('tbody tr').count(), 1);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Export CSV' }).click(),
    ]);
    const csv = await new Promise<string>((resolve, reject) => {
      download.createReadStream().then((stream) => {
        const parts: Buffer[] = [];
        stream.on('data', (c: Buffer) => parts.push(c));
        stream.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
        stream.on('error', reject);
      }, reject);
    });
    assert.match(csv, /blocked\.person@example\.org/i);
    await row.getByRole('button', { name: 'Remove' }).click();
    await row.waitFor({ state: 'detached' });
    await send(w.p.production, settings.liveKey, {
      to: 'blocked.person@example.org',
      subject: 'after the removal',
    });
  });

  test("webhooks: a refused URL is explained in words; the delivery log shows each attempt's request body and answer, newest first, and redelivers", async () => {
    const { page, problems } = await signedIn(MEMBER);
    // The refused URL's 422 is what this test provokes.
    problems.expect(/answer 422: POST .*\/webhooks$/, /status of 422/);
    await page.goto(`/#/projects/${w.a.project.id}/webhooks`);
    await page.getByLabel('URL').fill('https://user:secret@hooks.example.com/in');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const refusal = page.getByRole('alert').filter({ hasText: 'This URL cannot receive webhooks' });
    await refusal.waitFor();
    assert.match((await refusal.textContent())!, /must not carry credentials/);
    assert.doesNotMatch((await refusal.textContent())!, /--url/);

    await page.getByLabel('URL').fill(receiver.url('/screens-hook'));
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    receiver.respond = () => ({ status: 500, body: 'our database is down' });
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page
      .getByRole('status')
      .getByText(/not delivered \(HTTP 500\)/)
      .waitFor();
    receiver.respond = () => ({ status: 200, body: '{"received":true}' });

    const log = page.locator('tbody.attempts');
    const first = log.locator('tr[data-delivery]').first();
    await first.getByRole('button', { name: 'Details' }).click();
    const details = log.locator('tr.attempt-details');
    const body = JSON.parse((await details.locator('pre.request-body').textContent())!);
    const delivery = (await first.getAttribute('data-delivery'))!;
    assert.deepEqual([body.id, body.type], [delivery, 'webhook.test']);
    assert.equal(await details.locator('pre.answer-body').textContent(), 'our database is down');

    await first.getByRole('button', { name: 'Redeliver' }).click();
    await page
      .getByRole('status')
      .getByText(`Redelivered ${delivery} (attempt 2): delivered (HTTP 200).`)
      .waitFor();
    // Newest first: the redelivery's attempt on top.
    const top = log.locator('tr[data-delivery]').first();
    await top.locator('td').nth(2).getByText('2', { exact: true }).waitFor();
    assert.match((await top.textContent())!, /200 delivered/);
    await top.getByRole('button', { name: 'Details' }).click();
    await log
      .locator('tr.attempt-details pre.answer-body')
      .getByText('{"received":true}')
      .waitFor();
    const resent = receiver.received.filter((r) => r.path === '/screens-hook');
    assert.equal(resent.length, 2);
    assert.equal(
      resent[1].raw.toString('utf8'),
      resent[0].raw.toString('utf8'),
      'the same body, sent again',
    );
  });

  test("the audit log filters by operator email; a project's plan is chosen from the configured plans, and byte figures are in human units", async () => {
    await send(w.p.production, settings.liveKey, { subject: 'counted in the volume' });
    const { page } = await signedIn();
    await page.goto('/#/projects');
    const card = page.locator('article.project').filter({ hasText: 'settings project' });
    await card.getByText(/^Volume this month$/).waitFor();
    assert.match(
      (await card.locator('.usage').nth(2).textContent())!,
      /^Volume this month(\d+ B|\d+(\.\d)? KB) \/ 50 GB$/,
    );
    const plan = card.getByLabel('Plan of settings project');
    assert.deepEqual(await plan.locator('option').allTextContents(), [
      'free — 3,000 messages / month, 1 GB (default)',
      'pro — 50,000 messages / month, 50 GB',
    ]);
    await plan.selectOption('free');
    await card.getByRole('button', { name: 'Change plan' }).click();
    await card.getByRole('status').getByText('settings project is on the free plan now').waitFor();
    assert.equal(
      expectStatus(await w.owner.get(`/projects/${settings.project.id}`), 200).plan,
      'free',
    );
    await card
      .locator('.usage')
      .nth(2)
      .getByText(/ \/ 1 GB$/)
      .waitFor();

    // The screen's first action: a new project, on the plan chosen, appears with its card.
    const create = page
      .locator('form')
      .filter({ has: page.getByRole('heading', { name: 'New project' }) });
    await create.getByLabel('Name').fill('created in the console');
    await create.getByLabel('Plan').selectOption('free');
    await create.getByRole('button', { name: 'Create project' }).click();
    await page.locator('article.project').filter({ hasText: 'created in the console' }).waitFor();
    const made = expectStatus(await w.owner.get('/projects'), 200).projects.find(
      (pr: { name: string }) => pr.name === 'created in the console',
    );
    assert.equal(made?.plan, 'free');

    // The plan change was the owner's; the member's actions are theirs.
    expectStatus(
      await w.member.post(`/projects/${w.a.project.id}/suppressions`, {
        email: 'audited@example.org',
      }),
      201,
    );
    await page.goto('/#/audit');
    await page.getByLabel(/^Operator/).fill(MEMBER);
    await page.getByRole('button', { name: 'Filter' }).click();
    // The unfiltered page (the owner's rows too) stays on screen until the filtered one arrives.
    await page.waitForFunction((member) => {
      const cells = [
        ...document.querySelectorAll('[aria-label="Audit log"] tbody tr td:nth-child(2)'),
      ];
      return cells.length > 0 && cells.every((c) => c.textContent === member);
    }, MEMBER);
    await page.getByRole('cell', { name: 'suppression.add' }).first().waitFor();
    const who = await page
      .getByRole('region', { name: 'Audit log' })
      .locator('tbody tr td:nth-child(2)')
      .allTextContents();
    assert.ok(who.length > 0);
    assert.deepEqual([...new Set(who)], [MEMBER]);
  });

  test('public viewer: a sandbox capture says "Test message, not sent"; the message lists its live links, and a revoked one answers "Not found" like a forged one', async () => {
    const captured = await send(w.p.sandbox, shop.testKey, {
      subject: 'Preview of the newsletter',
    });
    const { page } = await signedIn();
    await page.goto(`/#/messages/${captured}`);
    await page.getByRole('heading', { name: 'Preview of the newsletter' }).waitFor();
    await page.getByRole('button', { name: 'Share' }).click();
    const url = (await page.locator('.share-link a').getAttribute('href'))!;
    const links = page.getByRole('region', { name: 'Public links' });
    await links.getByRole('listitem').first().waitFor();
    assert.equal(await links.getByRole('listitem').count(), 1);
    assert.match(
      (await links.getByRole('listitem').first().textContent())!,
      /^vl\.[0-9a-z]{16} by owner@example\.com/,
    );

    const viewer = await page.context().newPage();
    // The revoked link's 404 is what this test provokes.
    watch(viewer, [w.p.production]).expect(
      new RegExp(`answer 404: GET ${url.replace(/[.?*+^$()[\]{}|\\/]/g, '\\$&')}$`),
      /status of 404/,
    );
    await viewer.goto(url);
    assert.equal(await viewer.locator('.status').textContent(), 'Test message, not sent');

    await links.getByRole('button', { name: 'Revoke' }).click();
    await page
      .getByRole('dialog', { name: 'Revoke this public link?' })
      .getByRole('button', { name: 'Revoke the link' })
      .click();
    await page
      .getByRole('status')
      .getByText(/revoked: it no longer opens the message/)
      .waitFor();
    assert.equal(
      await page.locator('.share-link').count(),
      0,
      'the revoked link is no longer offered',
    );
    const answer = await viewer.goto(url);
    assert.equal(answer?.status(), 404);
    await viewer.getByRole('heading', { name: 'Not found' }).waitFor();
    const forged = await fetch(`${url.slice(0, -2)}${url.endsWith('AA') ? 'BB' : 'AA'}`);
    assert.equal(await answer!.text(), await forged.text());
  });

  test("accessibility: every screen, light and dark, has nothing axe-core calls serious or critical (images without alt text, unnamed buttons and inputs, ARIA misuse, contrast), and the keyboard's focus is always visible", async () => {
    const screens = [
      '/#/overview',
      `/#/messages?project=${shop.project.id}`,
      `/#/messages/${showcase}`,
      `/#/projects/${shop.project.id}/inbox`,
      '/#/projects',
      `/#/projects/${w.a.project.id}/keys`,
      `/#/projects/${shop.project.id}/providers`,
      `/#/projects/${w.a.project.id}/webhooks`,
      `/#/projects/${shop.project.id}/suppressions`,
      `/#/projects/${shop.project.id}/dkim`,
      '/#/operators',
      '/#/audit',
      '/#/account',
    ];
    const found: string[] = [];
    // The sign-in form, before any session.
    const ctx = await newContext(browser, w.p.console);
    contexts.push(ctx);
    const signInPage = await ctx.newPage();
    watch(signInPage);
    await signInPage.goto('/');
    await signInPage.getByRole('button', { name: 'Sign in' }).waitFor();
    for (const v of await axeViolations(signInPage))
      found.push(`sign-in: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.join(', ')}`);
    for (const missing of await focusWithoutRing(signInPage, 4))
      found.push(`sign-in: no focus ring on ${missing}`);

    for (const scheme of ['light', 'dark'] as const) {
      const { page } = await signedIn(OWNER, { scheme });
      for (const route of screens) {
        await page.goto(route);
        await page.locator('main h1').first().waitFor();
        await page.waitForFunction(
          () => !document.querySelector('main')?.textContent?.includes('Loading'),
        );
        for (const v of await axeViolations(page))
          found.push(`${scheme} ${route}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.join(', ')}`);
        if (scheme === 'light')
          for (const missing of await focusWithoutRing(page, 30))
            found.push(`${route}: no focus ring on ${missing}`);
      }
    }
    assert.deepEqual(found, []);
  });

  test("screenshots: overview, messages and a message at 1440 × 900 and 390 × 844, light and dark (PNG in the test output directory; the README's come from here)", async () => {
    const dir = testOutputDir('console-screenshots');
    const shots: string[] = [];
    // A day of mail for the chart to show (events and hand-offs over the last 23 hours, as a shop's).
    const account = (await w.p.ctx.store.get<{ id: string }>(
      'SELECT id FROM provider_accounts WHERE project_id = ? AND detached_at IS NULL',
      shop.project.id,
    ))!;
    const hour = Math.floor(Date.now() / 3600_000) * 3600_000;
    for (let h = 23; h >= 1; h--) {
      const at = hour - h * 3600_000 + 600_000;
      const volume = 20 + Math.round(18 * Math.sin(((24 - h) / 24) * Math.PI * 2 - 1.2) + 18);
      const counts: [string, number][] = [
        ['mail.accepted', volume],
        ['mail.sent', volume - 2],
        ['mail.delivered', volume - 5],
        ['mail.bounced', h % 5 === 0 ? 2 : 0],
        ['mail.failed', h === 7 ? 1 : 0],
      ];
      for (const [type, n] of counts)
        for (let i = 0; i < n; i++)
          await w.p.ctx.store.run(
            "INSERT INTO events (project_id, message_id, type, created_at, data) VALUES (?, NULL, ?, ?, '{}')",
            shop.project.id,
            type,
            at + i,
          );
      for (let i = 0; i < (h >= 9 && h <= 11 ? 6 : 0); i++) {
        await w.p.ctx.store.run(
          'INSERT INTO attempts (message_id, provider_account_id, provider_slug, started_at, finished_at, outcome, reply) VALUES (?, ?, ?, ?, ?, ?, ?)',
          showcase,
          account.id,
          'smtp',
          at,
          at + 1,
          'temporary',
          'smtp: 421 4.7.0 too many connections',
        );
      }
    }
    for (const scheme of ['light', 'dark'] as const) {
      for (const [size, viewport] of [
        ['1440x900', { width: 1440, height: 900 }],
        ['390x844', { width: 390, height: 844 }],
      ] as const) {
        const { page } = await signedIn(OWNER, { viewport, scheme });
        for (const [name, route, ready] of [
          [
            'overview',
            '/#/overview',
            () =>
              page
                .getByRole('img', { name: /per hour/ })
                .locator('canvas')
                .waitFor(),
          ],
          ['messages', '/#/messages', () => page.locator('tbody tr').first().waitFor()],
          [
            'message',
            `/#/messages/${showcase}`,
            () =>
              page.frameLocator('iframe.preview').getByText('Your order is on its way').waitFor(),
          ],
        ] as const) {
          await page.goto(route);
          await ready();
          await page.waitForFunction(
            () => !document.querySelector('main')?.textContent?.includes('Loading'),
          );
          await page.evaluate(() => document.fonts.ready.then(() => undefined));
          // What the picture must show: the scheme asked for, and nothing cut off sideways.
          const shown = await page.evaluate(() => {
            const [r, g, b] = getComputedStyle(document.documentElement)
              .backgroundColor.match(/\d+/g)!
              .map(Number);
            return {
              luminance: (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255,
              fits: document.documentElement.scrollWidth <= window.innerWidth,
            };
          });
          assert.equal(
            shown.luminance < 0.5,
            scheme === 'dark',
            `${name} ${size} ${scheme}: background luminance ${shown.luminance}`,
          );
          assert.equal(shown.fits, true, `${name} ${size} ${scheme}: nothing overflows sideways`);
          const file = path.join(dir, `${name}-${size}-${scheme}.png`);
          const png = await page.screenshot({ path: file });
          // A PNG of the viewport's size (device scale 1).
          assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
          assert.deepEqual(
            [png.readUInt32BE(16), png.readUInt32BE(20)],
            [viewport.width, viewport.height],
            file,
          );
          shots.push(file);
        }
      }
    }
    assert.equal(shots.length, 12);
    // The README's images, refreshed when asked (POSTERN_REFRESH_DOCS=1): the desktop, light ones.
    if (process.env.POSTERN_REFRESH_DOCS === '1') {
      copyFileSync(
        path.join(dir, 'overview-1440x900-light.png'),
        path.join(repoRoot, 'docs', 'console-overview.png'),
      );
      copyFileSync(
        path.join(dir, 'message-1440x900-light.png'),
        path.join(repoRoot, 'docs', 'console-message.png'),
      );
    }
  });
});
