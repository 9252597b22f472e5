/**
 * A real browser for the console's tests: Debian's chromium, headless, driven by
 * playwright-core (which downloads no browser). One browser per test file; a context (its own
 * cookies and storage) per test.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { HANG_GUARD_MS } from './waiting.js';

/** Where Debian's chromium package puts the browser (the `chromium` on PATH is a shell wrapper). */
const CANDIDATES = [process.env.POSTERN_CHROMIUM, '/usr/lib/chromium/chromium', '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => Boolean(p));

export function chromiumPath(): string {
  const found = CANDIDATES.find((p) => existsSync(p));
  if (!found) throw new Error('no chromium: install the Debian package (apt-get install chromium), or set POSTERN_CHROMIUM');
  return found;
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

export type StorageState = Awaited<ReturnType<BrowserContext['storageState']>>;

/**
 * A fresh context at a desktop (1280 px) or phone (390 px) width, with the console's origin;
 * with `storageState`, the cookies and local storage of another (a session signed in once). Its
 * waits (Playwright's default, 30 s) are hang guards, as every wait in the suites.
 */
export async function newContext(browser: Browser, baseURL: string, viewport: 'desktop' | 'phone' = 'desktop', storageState?: StorageState): Promise<BrowserContext> {
  const context = await browser.newContext({
    baseURL,
    storageState,
    viewport: viewport === 'desktop' ? { width: 1280, height: 800 } : { width: 390, height: 800 },
    timezoneId: 'America/New_York',
    locale: 'en-US',
  });
  context.setDefaultTimeout(HANG_GUARD_MS);
  context.setDefaultNavigationTimeout(HANG_GUARD_MS);
  return context;
}

/** Signs in through the sign-in form, as a person would. */
export async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.goto('/');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
}

/**
 * What went wrong on a page that nobody asked for: errors and warnings in its console (a CSP
 * refusal, an uncaught exception), and the app's own requests that failed or were refused (any
 * answer of 400 and up from `origins`). A test names what it provokes (`expect`); everything
 * else fails it (`assertNone`). Requests the app or a navigation cancelled (net::ERR_ABORTED)
 * are not failures.
 */
export class PageProblems {
  private readonly seen: string[] = [];
  private readonly expected: RegExp[] = [];

  constructor(
    readonly page: Page,
    origins: string[],
  ) {
    const ours = (url: string) => origins.some((o) => url.startsWith(o));
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') this.seen.push(`console ${m.type()}: ${m.text()} [${m.location().url}]`);
    });
    page.on('pageerror', (err) => this.seen.push(`uncaught: ${err.message}`));
    page.on('requestfailed', (r) => {
      const why = r.failure()?.errorText ?? '';
      if (ours(r.url()) && !why.includes('ERR_ABORTED')) this.seen.push(`request failed: ${r.method()} ${r.url()} ${why}`);
    });
    page.on('response', (r) => {
      if (ours(r.url()) && r.status() >= 400) this.seen.push(`answer ${r.status()}: ${r.request().method()} ${r.url()}`);
    });
  }

  /** A problem this test provokes (a wrong password's 401, a CSP refusal of a message's script). */
  expect(...patterns: RegExp[]): this {
    this.expected.push(...patterns);
    return this;
  }

  /** What was seen that nobody expected. */
  unexpected(): string[] {
    return this.seen.filter((line) => !this.expected.some((p) => p.test(line)));
  }
}
