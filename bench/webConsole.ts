/**
 * Web console benchmark (`BENCH_ONLY=web npm run bench`): how long the first screen after
 * sign-in takes with `BENCH_WEB_MESSAGES` (100,000) messages in the index.
 *
 * A real Postern process; the messages arrive over the batch endpoint (100 a request, as
 * clients send them: spool files, index rows and events), nine in ten to production (queued:
 * delivery is off), one in ten to the sandbox (captured). Then Debian's chromium (headless,
 * playwright-core) signs in through the form `BENCH_WEB_ROUNDS` (5) times, each in a fresh
 * context (no cache, no cookies): the time from pressing "Sign in" to the overview drawn
 * (heading, queue tiles with their figures, the 24 h chart's canvas); and then from asking
 * for the message list to its first page of rows; and, signed in, opening the console again (a
 * reload) to the overview drawn. Target: the first screen in under 1 s.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { systemClock } from '../src/clock.js';
import { buildConfig } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { createKey } from '../src/operator/keys.js';
import { createOperator } from '../src/operator/operators.js';
import { createProject } from '../src/operator/projects.js';
import { attachProvider } from '../src/operator/providers.js';
import { openDatabase } from '../src/store/db.js';
import { sqliteQueries } from '../src/store/queries.js';
import { launchBrowser } from '../test/support/browser.js';
import { tempStateDir } from '../test/support/postern.js';
import { BENCH_RATE_LIMITS, removeAfterBench, startBenchPostern } from './benchServer.js';

const MESSAGES = Number(process.env.BENCH_WEB_MESSAGES ?? 100_000);
const ROUNDS = Number(process.env.BENCH_WEB_ROUNDS ?? 5);
const PASSWORD = 'bench console password';

export interface WebConsoleBench {
  messages: number;
  rounds: number;
  /** Pressing "Sign in" → the overview drawn, ms. */
  first_screen_ms: { p50: number; max: number; each: number[] };
  /** Signed in already: opening the console (a reload, files cached) → the overview drawn, ms. */
  signed_in_open_ms: { p50: number; max: number; each: number[] };
  /** Opening the message list → its first page of rows, ms. */
  message_list_ms: { p50: number; max: number; each: number[] };
  /** Within the first screen: the sign-in request (the password hash check) and the overview request, as the browser timed them. */
  sign_in_request_ms: { p50: number; max: number; each: number[] };
  overview_request_ms: { p50: number; max: number; each: number[] };
  fill_seconds: number;
}

async function setUp(stateDir: string) {
  const db = openDatabase(stateDir, silentLogger());
  try {
    const config = buildConfig({ state_dir: stateDir }, {});
    const ctx = {
      store: sqliteQueries(db),
      clock: systemClock,
      config,
      spoolRoot: path.join(stateDir, 'spool'),
    };
    const project = await createProject(ctx, 'bench-web', 'pro');
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: '9',
      tls: 'none',
    });
    await createOperator(ctx, { email: 'bench@example.com', role: 'owner', password: PASSWORD });
    return {
      live: (await createKey(ctx, project.id, 'live')).key,
      test: (await createKey(ctx, project.id, 'test')).key,
    };
  } finally {
    db.close();
  }
}

async function fill(
  production: string,
  sandbox: string,
  keys: { live: string; test: string },
): Promise<void> {
  let batches = 0;
  const total = Math.ceil(MESSAGES / 100);
  const worker = async () => {
    while (batches < total) {
      const n = batches++;
      const toSandbox = n % 10 === 9;
      const messages = Array.from({ length: Math.min(100, MESSAGES - n * 100) }, (_, i) => ({
        from: 'Bench <bench@example.com>',
        to: `rcpt${(n * 100 + i) % 997}@example.org`,
        subject: `Order ${n * 100 + i} confirmed`,
        html: `<p>Thanks for order <b>${n * 100 + i}</b>.</p>`,
        text: `Thanks for order ${n * 100 + i}.`,
        tags: ['orders'],
      }));
      const res = await fetch(`${toSandbox ? sandbox : production}/v1/send/batch`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${toSandbox ? keys.test : keys.live}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ messages }),
      });
      if (res.status !== 207) throw new Error(`batch answered ${res.status}: ${await res.text()}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

const stats = (each: number[]) => {
  const sorted = [...each].sort((a, b) => a - b);
  return { p50: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1], each };
};

export async function webConsoleBench(): Promise<WebConsoleBench> {
  const stateDir = tempStateDir('postern-bench-web-');
  removeAfterBench(stateDir);
  const configFile = `${stateDir}/bench.json`;
  writeFileSync(
    configFile,
    JSON.stringify({ delivery: { enabled: false }, rate_limits: BENCH_RATE_LIMITS }),
  );
  const keys = await setUp(stateDir);
  const server = await startBenchPostern(stateDir, configFile);
  const browser = await launchBrowser();
  try {
    const consoleUrl = server.listeners.find((l) => l.protocol === 'console')!.url;
    const filled = performance.now();
    await fill(server.production, server.sandbox, keys);
    const fillSeconds = (performance.now() - filled) / 1000;
    const firstScreen: number[] = [];
    const list: number[] = [];
    const signedInOpen: number[] = [];
    const signInRequest: number[] = [];
    const overviewRequest: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const ctx = await browser.newContext({
        baseURL: consoleUrl,
        viewport: { width: 1280, height: 800 },
      });
      const page = await ctx.newPage();
      await page.goto('/');
      await page.getByLabel('Email').fill('bench@example.com');
      await page.getByLabel('Password').fill(PASSWORD);
      const started = performance.now();
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await page.locator('.tile-value').first().waitFor();
      await page.locator('.chart canvas').waitFor();
      firstScreen.push(Math.round(performance.now() - started));
      const requests = await page.evaluate(() =>
        performance.getEntriesByType('resource').map((e) => ({ name: e.name, ms: e.duration })),
      );
      const took = (suffix: string) =>
        Math.round(requests.filter((r) => r.name.endsWith(suffix)).pop()?.ms ?? NaN);
      signInRequest.push(took('/console/api/v1/session'));
      overviewRequest.push(took('/console/api/v1/overview'));
      const reloaded = performance.now();
      await page.reload();
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await page.locator('.tile-value').first().waitFor();
      await page.locator('.chart canvas').waitFor();
      signedInOpen.push(Math.round(performance.now() - reloaded));
      const listStarted = performance.now();
      await page.getByRole('link', { name: 'Messages', exact: true }).click();
      await page.locator('tbody tr').nth(49).waitFor();
      list.push(Math.round(performance.now() - listStarted));
      await ctx.close();
    }
    return {
      messages: MESSAGES,
      rounds: ROUNDS,
      first_screen_ms: stats(firstScreen),
      message_list_ms: stats(list),
      signed_in_open_ms: stats(signedInOpen),
      sign_in_request_ms: stats(signInRequest),
      overview_request_ms: stats(overviewRequest),
      fill_seconds: +fillSeconds.toFixed(1),
    };
  } finally {
    await browser.close();
    await server.stop();
  }
}

export function webConsoleLines(b: WebConsoleBench): string[] {
  return [
    `web console with ${b.messages.toLocaleString('en')} messages in the index (filled over the batch API in ${b.fill_seconds} s): sign-in → overview drawn p50 ${b.first_screen_ms.p50} ms, max ${b.first_screen_ms.max} ms (${b.first_screen_ms.each.join(', ')}); ` +
      `of which the sign-in request (scrypt) p50 ${b.sign_in_request_ms.p50} ms and the overview request p50 ${b.overview_request_ms.p50} ms (${b.overview_request_ms.each.join(', ')}); ` +
      `signed in, opening the console → overview drawn p50 ${b.signed_in_open_ms.p50} ms, max ${b.signed_in_open_ms.max} ms (${b.signed_in_open_ms.each.join(', ')}); ` +
      `message list's first 50 rows p50 ${b.message_list_ms.p50} ms, max ${b.message_list_ms.max} ms (${b.message_list_ms.each.join(', ')}); ${b.rounds} rounds, fresh browser context each`,
  ];
}
