/**
 * The console's Domains screen in a real browser (Debian's chromium via playwright-core), its
 * lookups going to a DNS server the test runs: an operator opens the screen from the
 * navigation, reads which records of the project's sending domain are present, missing or
 * different, copies the value to publish, publishes it (in the test's DNS server), checks again
 * and sees the domain complete; another domain is checked from the form.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { addDkimKey, type DkimKeyView } from '../../src/operator/dkim.js';
import { attachProvider } from '../../src/operator/providers.js';
import { launchBrowser, newContext, PageProblems, signIn } from '../support/browser.js';
import { type ConsoleWorld, consoleWorld, operatorAccount, PASSWORD } from '../support/console.js';
import { DnsServer } from '../support/dnsServer.js';
import { createProjectWithKeys, type ProjectWithKeys } from '../support/postern.js';

const OWNER = 'owner@example.com';
const MEMBER = 'domains-member@example.com';

describe('Domains screen in a browser', () => {
  let dns: DnsServer;
  let w: ConsoleWorld;
  let browser: Browser;
  let shop: ProjectWithKeys;
  let key: DkimKeyView;
  const contexts: BrowserContext[] = [];
  let watched: PageProblems[] = [];

  async function page(email: string): Promise<Page> {
    const ctx = await newContext(browser, w.p.console);
    contexts.push(ctx);
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: w.p.console });
    const p = await ctx.newPage();
    watched.push(new PageProblems(p, [w.p.console]));
    await signIn(p, email, PASSWORD);
    return p;
  }

  before(async () => {
    dns = await DnsServer.start();
    w = await consoleWorld({
      config: { dns: { servers: [dns.address], timeout_ms: 500, tries: 1 } },
    });
    shop = await createProjectWithKeys(w.p.ctx, 'shop project');
    key = await addDkimKey(w.p.ctx, shop.project.id, { domain: 'shop.test', selector: 'web1' });
    await attachProvider(w.p.ctx, shop.project.id, {
      slug: 'provider-g-smtp',
      user: 'me@shop.test',
      pass: 'app-password',
    });
    await operatorAccount(w.p.ctx, MEMBER, 'member', [shop.project.id]);
    dns.set('_spf.google.com', 'TXT', ['v=spf1 ip4:35.190.247.0/24 ~all']);
    // The DKIM key is published; the SPF record lacks Google's include; there is no DMARC record.
    dns.set('web1._domainkey.shop.test', 'TXT', [key.dns_value]);
    dns.set('shop.test', 'TXT', ['v=spf1 mx -all']);
    browser = await launchBrowser();
  });
  afterEach(() => {
    const seen = watched.flatMap((p) => p.unexpected());
    watched = [];
    assert.deepEqual(
      seen,
      [],
      "nothing in the browser's console, and no failed request of the app's own",
    );
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await w?.p.close();
    await dns?.close();
  });

  test('the records of the sending domain, each present, missing or different with the value to publish; copied, published and checked again, the domain is complete', async () => {
    const p = await page(OWNER);
    await p.getByLabel('Project').selectOption({ label: 'shop project' });
    await p.getByRole('link', { name: 'Domains', exact: true }).click();
    await p.getByRole('heading', { name: 'Domains', exact: true }).waitFor();
    const card = p.getByRole('article', { name: 'Domain shop.test' });
    await card.getByRole('status').getByText('2 records to publish or fix').waitFor();
    await card.getByText('DKIM selector web1').waitFor();

    const row = (label: string) => card.getByRole('row', { name: label, exact: true });
    const dkim = row('DKIM TXT web1._domainkey.shop.test');
    const spf = row('SPF TXT shop.test');
    const dmarc = row('DMARC TXT _dmarc.shop.test');
    assert.equal(await dkim.locator('.badge').textContent(), 'present');
    assert.equal(await spf.locator('.badge').textContent(), 'different');
    assert.equal(await dmarc.locator('.badge').textContent(), 'missing');
    assert.equal(await dkim.getByTestId('value').textContent(), key.dns_value);
    assert.equal(
      await spf.getByTestId('value').textContent(),
      'v=spf1 mx include:_spf.google.com -all',
    );
    assert.equal(await spf.locator('ul.found code').textContent(), 'v=spf1 mx -all');
    assert.equal(
      await dmarc.getByTestId('value').textContent(),
      'v=DMARC1; p=none; rua=mailto:dmarc-reports@shop.test',
    );
    await dmarc.getByText('nothing').waitFor();
    // What Postern cannot check is named (Google's own DKIM key).
    await card.getByText(/google\._domainkey/).waitFor();

    // The person copies each value to publish and publishes it at their DNS host (here, the test's server).
    const copied = async (r: ReturnType<typeof row>) => {
      await r.getByRole('button', { name: 'Copy value' }).click();
      await r.getByRole('button', { name: 'Copied' }).waitFor();
      return p.evaluate(() => navigator.clipboard.readText());
    };
    const spfValue = await copied(spf);
    assert.equal(spfValue, 'v=spf1 mx include:_spf.google.com -all');
    dns.set('shop.test', 'TXT', [spfValue]);
    const dmarcValue = await copied(dmarc);
    dns.set('_dmarc.shop.test', 'TXT', [dmarcValue]);

    await card.getByRole('button', { name: 'Check again' }).click();
    await card.getByRole('status').getByText('All records published').waitFor();
    assert.equal(await spf.locator('.badge').textContent(), 'present');
    assert.equal(await dmarc.locator('.badge').textContent(), 'present');
    assert.equal(await dkim.locator('.badge').textContent(), 'present');
  });

  test('a member checks another domain from the form: it gets a card of its own with what it lacks; a revoked DKIM record shows as different with its problem', async () => {
    dns.set('web1._domainkey.shop.test', 'TXT', ['v=DKIM1; k=rsa; p=']);
    const p = await page(MEMBER);
    await p.getByRole('link', { name: 'Domains', exact: true }).click();
    const shopCard = p.getByRole('article', { name: 'Domain shop.test' });
    await shopCard.getByRole('status').getByText('1 record to publish or fix').waitFor();
    const dkim = shopCard.getByRole('row', {
      name: 'DKIM TXT web1._domainkey.shop.test',
      exact: true,
    });
    assert.equal(await dkim.locator('.badge').textContent(), 'different');
    await shopCard.getByText(/publishes an empty p= \(a revoked key\)/).waitFor();

    await p.getByLabel('Domain', { exact: true }).fill('News.Other.Test');
    await p.getByRole('button', { name: 'Check', exact: true }).click();
    const other = p.getByRole('article', { name: 'Domain news.other.test' });
    await other.getByRole('status').getByText('2 records to publish or fix').waitFor();
    const spf = other.getByRole('row', { name: 'SPF TXT news.other.test', exact: true });
    assert.equal(await spf.locator('.badge').textContent(), 'missing');
    assert.equal(
      await spf.getByTestId('value').textContent(),
      'v=spf1 include:_spf.google.com ~all',
    );
    assert.equal(
      await other
        .getByRole('row', { name: 'DMARC TXT _dmarc.news.other.test', exact: true })
        .locator('.badge')
        .textContent(),
      'missing',
    );
    // No key of the project signs for it (shop.test is no parent of it): the screen says to add one.
    await other.getByText(/No DKIM key signs mail from news\.other\.test/).waitFor();
    assert.equal(
      await p.getByLabel('Domain', { exact: true }).inputValue(),
      '',
      'the form is cleared for the next domain',
    );
  });
});
