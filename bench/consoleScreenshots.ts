/**
 * The README's console screenshots, taken in Debian's chromium by playwright-core against a
 * real server with a little traffic (delivered through a local relay, a few refused):
 * `npm run build && node dist/bench/consoleScreenshots.js` writes docs/console-overview.png and
 * docs/console-message.png.
 */
import path from 'node:path';
import { createKey } from '../src/operator/keys.js';
import { createProject } from '../src/operator/projects.js';
import { attachProvider } from '../src/operator/providers.js';
import { launchBrowser, signIn } from '../test/support/browser.js';
import { operatorAccount } from '../test/support/console.js';
import { post, repoRoot, startTestPostern, validMessage } from '../test/support/postern.js';
import { Sink } from '../test/support/relaySink.js';
import { waitFor } from '../test/support/waiting.js';

const sink = await Sink.start('relay', {
  rcpt: (to) => (to.startsWith('gone') ? { code: 550, text: '5.1.1 No such user' } : null),
});
const p = await startTestPostern({ console: true, config: { delivery: { enabled: true } } });
const project = await createProject(p.ctx, 'Storefront', 'pro');
await attachProvider(p.ctx, project.id, {
  slug: 'smtp',
  host: '127.0.0.1',
  port: String(sink.port),
  tls: 'none',
});
const live = (await createKey(p.ctx, project.id, 'live')).key;
const test = (await createKey(p.ctx, project.id, 'test')).key;
const owner = await operatorAccount(p.ctx, 'ops@example.com', 'owner');

for (let i = 0; i < 24; i++) {
  const to = i % 8 === 7 ? `gone${i}@example.org` : `customer${i}@example.org`;
  await post(p.production, '/v1/send', {
    key: live,
    json: validMessage({ to, subject: `Order #10${i} confirmed`, category: 'orders' }),
  });
}
await post(p.production, '/v1/send', {
  key: live,
  json: validMessage({ subject: 'Weekly digest', paused: true }),
});
const html = `<div style="font-family:Helvetica,Arial,sans-serif;max-width:560px;margin:0 auto;color:#222">
<h2 style="color:#0b5cad">Welcome to Storefront, Ann!</h2>
<p>Your account is ready. Confirm your address to start ordering:</p>
<p><a href="https://storefront.example/confirm" style="background:#0b5cad;color:#fff;padding:10px 18px;border-radius:6px;text-decoration:none">Confirm my email</a></p>
<p style="color:#666;font-size:13px">If you did not sign up, ignore this message.</p></div>`;
let shown = '';
for (const subject of ['Password reset', 'Your receipt', 'Welcome to Storefront']) {
  const res = await post(p.sandbox, '/v1/send', {
    key: test,
    json: validMessage({
      from: 'Storefront <hello@storefront.example>',
      to: 'Ann <ann@example.org>',
      subject,
      html,
      tags: ['onboarding'],
    }),
  });
  shown = res.body.id;
}
await waitFor(() => sink.received.length >= 21, 30_000);

const browser = await launchBrowser();
const ctx = await browser.newContext({
  baseURL: p.console,
  viewport: { width: 1280, height: 900 },
  deviceScaleFactor: 1,
});
const page = await ctx.newPage();
await signIn(page, owner.email, owner.password);
await page.locator('.chart canvas').waitFor();
await page.waitForTimeout(500);
await page.screenshot({ path: path.join(repoRoot, 'docs', 'console-overview.png') });
await page.goto(`/#/messages/${shown}`);
await page.frameLocator('iframe.preview').locator('h2').waitFor();
await page.getByRole('button', { name: 'Share' }).click();
await page.locator('.share-link').waitFor();
await page.screenshot({ path: path.join(repoRoot, 'docs', 'console-message.png') });
await browser.close();
await p.close();
await sink.close();
console.log('wrote docs/console-overview.png and docs/console-message.png');
