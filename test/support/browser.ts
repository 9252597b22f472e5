/**
 * A real browser for the console's tests: Debian's chromium, headless, driven by
 * playwright-core (which downloads no browser). One browser per test file; a context (its own
 * cookies and storage) per test.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { repoRoot } from './paths.js';
import { HANG_GUARD_MS } from './waiting.js';

/** Where Debian's chromium package puts the browser (the `chromium` on PATH is a shell wrapper). */
const CANDIDATES = [
  process.env.POSTERN_CHROMIUM,
  '/usr/lib/chromium/chromium',
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
].filter((p): p is string => Boolean(p));

export function chromiumPath(): string {
  const found = CANDIDATES.find((p) => existsSync(p));
  if (!found)
    throw new Error(
      'no chromium: install the Debian package (apt-get install chromium), or set POSTERN_CHROMIUM',
    );
  return found;
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

export type StorageState = Awaited<ReturnType<BrowserContext['storageState']>>;

/**
 * A fresh context at a desktop (1280 px) or phone (390 px) width (or the size given), with the
 * console's origin, in the light or dark colour scheme; with `storageState`, the cookies and
 * local storage of another (a session signed in once). Its waits (Playwright's default, 30 s)
 * are hang guards, as every wait in the suites.
 */
export async function newContext(
  browser: Browser,
  baseURL: string,
  viewport: 'desktop' | 'phone' | { width: number; height: number } = 'desktop',
  storageState?: StorageState,
  colorScheme: 'light' | 'dark' = 'light',
): Promise<BrowserContext> {
  const context = await browser.newContext({
    baseURL,
    storageState,
    colorScheme,
    viewport:
      viewport === 'desktop'
        ? { width: 1280, height: 800 }
        : viewport === 'phone'
          ? { width: 390, height: 800 }
          : viewport,
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
      if (m.type() === 'error' || m.type() === 'warning')
        this.seen.push(`console ${m.type()}: ${m.text()} [${m.location().url}]`);
    });
    page.on('pageerror', (err) => this.seen.push(`uncaught: ${err.message}`));
    page.on('requestfailed', (r) => {
      const why = r.failure()?.errorText ?? '';
      if (ours(r.url()) && !why.includes('ERR_ABORTED'))
        this.seen.push(`request failed: ${r.method()} ${r.url()} ${why}`);
    });
    page.on('response', (r) => {
      if (ours(r.url()) && r.status() >= 400)
        this.seen.push(`answer ${r.status()}: ${r.request().method()} ${r.url()}`);
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

/**
 * After a test: what its watched pages showed that it did not provoke, then its tabs closed, as a
 * person closes them (each holds a live stream, and an operator may hold 8 at once).
 */
export async function endTestTabs(
  contexts: BrowserContext[],
  watched: PageProblems[],
): Promise<string[]> {
  const seen = watched.splice(0).flatMap((p) => p.unexpected());
  for (const c of contexts.splice(0)) await c.close().catch(() => undefined);
  return seen;
}

/** Where tests leave what a person looks at afterwards (screenshots): `POSTERN_TEST_OUTPUT`, else dist/test-output. */
export function testOutputDir(...parts: string[]): string {
  const dir = path.join(
    process.env.POSTERN_TEST_OUTPUT ?? path.join(repoRoot, 'dist', 'test-output'),
    ...parts,
  );
  mkdirSync(dir, { recursive: true });
  return dir;
}

const axeSource = readFileSync(
  createRequire(import.meta.url).resolve('axe-core/axe.min.js'),
  'utf8',
);

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * What axe-core (run in the page, as the browsers' own audits do) finds serious or critical on
 * the page as it is now: images without alt text, buttons and inputs without a name, ARIA
 * misuse, text without contrast. Evaluated over the DevTools protocol, so the console's
 * script-src 'self' policy is not loosened for it.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axeSource);
  return page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(
            ctx: Document,
            opts: object,
          ): Promise<{
            violations: {
              id: string;
              impact: string | null;
              help: string;
              nodes: { target: string[] }[];
            }[];
          }>;
        };
      }
    ).axe;
    // Not into frames: the only one is a message's own HTML in its sandbox (an opaque origin axe cannot reach, and not the console's page).
    const result = await axe.run(document, { resultTypes: ['violations'], iframes: false });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({
        id: v.id,
        impact: v.impact,
        help: v.help,
        nodes: v.nodes.map((n) => n.target.join(' ')),
      }));
  });
}

/**
 * Tabs through the first `count` focusable elements from the top of the page and names those
 * that show no focus ring (no outline and no box-shadow while focused): a keyboard user would
 * not see where they are.
 */
export async function focusWithoutRing(page: Page, count: number): Promise<string[]> {
  // From the top: the body focused (a route change keeps the document, and Tab would go on from the last screen's focus).
  await page.evaluate(() => {
    const body = document.body;
    body.setAttribute('tabindex', '-1');
    body.focus();
    body.removeAttribute('tabindex');
    window.scrollTo(0, 0);
  });
  const missing: string[] = [];
  for (let i = 0; i < count; i++) {
    await page.keyboard.press('Tab');
    const seen = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      if (!el || el === document.body) return null;
      const style = getComputedStyle(el);
      const ring =
        (style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0) ||
        (style.boxShadow !== 'none' && style.boxShadow !== '');
      const label =
        el.getAttribute('aria-label') ??
        (el as HTMLInputElement).labels?.[0]?.textContent ??
        el.textContent ??
        '';
      const name = `${el.tagName.toLowerCase()}${el.getAttribute('type') ? `[type=${el.getAttribute('type')}]` : ''}${el.id ? `#${el.id}` : ''} "${label.trim().slice(0, 40)}" (outline ${style.outlineStyle} ${style.outlineWidth} ${style.outlineColor}; focus ${el.matches(':focus')}, focus-visible ${el.matches(':focus-visible')}, --focus ${style.getPropertyValue('--focus')}, page focused ${document.hasFocus()})`;
      return { ring, name };
    });
    if (seen === null) break;
    if (!seen.ring) missing.push(seen.name);
  }
  return missing;
}
