/**
 * The console API's sending domains (GET /projects/{id}/domains and .../domains/{domain}/check)
 * over real HTTP against a real server on either store, its lookups going to a DNS server the
 * test runs (test/support/dnsServer.ts): a project's domains from its DKIM keys and the mail it
 * sent, each record present, missing or different with the value to publish, what a member may
 * check, and the refusals — every answer checked against the console document.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { addDkimKey } from '../../src/operator/dkim.js';
import { attachProvider } from '../../src/operator/providers.js';
import { type ConsoleWorld, consoleWorld, expectError, expectStatus } from '../support/console.js';
import { DnsServer } from '../support/dnsServer.js';
import { post, validMessage } from '../support/postern.js';

describe('console: sending domains', () => {
  let dns: DnsServer;
  let w: ConsoleWorld;

  before(async () => {
    dns = await DnsServer.start();
    w = await consoleWorld({
      config: { dns: { servers: [dns.address], timeout_ms: 500, tries: 1 } },
    });
    dns.set('sendgrid.net', 'TXT', ['v=spf1 ip4:167.89.0.0/17 -all']);
  });
  after(async () => {
    await w?.p.close();
    await dns?.close();
  });

  test("a project's sending domains: its DKIM keys' and those its mail came from, by name", async () => {
    const key = await addDkimKey(w.p.ctx, w.a.project.id, { domain: 'zeta.test', selector: 'z1' });
    const sent = await post(w.p.sandbox, '/v1/send', {
      key: w.a.testKey,
      json: validMessage({ from: 'Alpha <alpha@Alpha.test>' }),
    });
    assert.equal(sent.status, 202, sent.text);
    const listed = expectStatus(await w.owner.get(`/projects/${w.a.project.id}/domains`), 200);
    assert.deepEqual(listed.domains, [
      { domain: 'alpha.test', dkim_keys: [], sent_from: true },
      { domain: 'zeta.test', dkim_keys: [{ id: key.id, selector: 'z1' }], sent_from: false },
    ]);
    // Another project's list is its own.
    assert.deepEqual(
      expectStatus(await w.owner.get(`/projects/${w.b.project.id}/domains`), 200).domains,
      [],
    );
  });

  test('the check: DKIM present, SPF different (the include it lacks added), DMARC missing, each with the value to publish; published, ok', async () => {
    const project = expectStatus(await w.owner.post('/projects', { name: 'domains api' }), 201);
    const key = await addDkimKey(w.p.ctx, project.id, { domain: 'shop.test', selector: 'api1' });
    await attachProvider(w.p.ctx, project.id, { slug: 'provider-b-api', apiKey: 'k' });
    dns.set('api1._domainkey.shop.test', 'TXT', [key.dns_value]);
    dns.set('shop.test', 'TXT', ['v=spf1 mx -all']);

    const check = expectStatus(
      await w.owner.get(`/projects/${project.id}/domains/Shop.Test/check`),
      200,
    );
    assert.equal(check.domain, 'shop.test');
    assert.deepEqual(check.projects, [project.id]);
    assert.equal(check.status, 'action_needed');
    const byName = (purpose: string, name: string) =>
      check.records.find((r: any) => r.purpose === purpose && r.name === name);
    assert.deepEqual(
      [
        byName('dkim', 'api1._domainkey.shop.test').state,
        byName('dkim', 'api1._domainkey.shop.test').value,
      ],
      ['present', key.dns_value],
    );
    const spf = byName('spf', 'shop.test');
    assert.deepEqual(
      [spf.state, spf.found, spf.value],
      ['different', ['v=spf1 mx -all'], 'v=spf1 mx include:sendgrid.net -all'],
    );
    const dmarc = byName('dmarc', '_dmarc.shop.test');
    assert.deepEqual(
      [dmarc.state, dmarc.found, dmarc.value],
      ['missing', [], 'v=DMARC1; p=none; rua=mailto:dmarc-reports@shop.test'],
    );
    assert.equal(byName('verification', 's1._domainkey.shop.test').state, 'missing');

    dns.set('shop.test', 'TXT', [spf.value]);
    dns.set('_dmarc.shop.test', 'TXT', [dmarc.value]);
    dns.set('s1._domainkey.shop.test', 'CNAME', 's1.domainkey.u42.wl7.sendgrid.net');
    dns.set('s2._domainkey.shop.test', 'CNAME', 's2.domainkey.u42.wl7.sendgrid.net');
    const again = expectStatus(
      await w.owner.get(`/projects/${project.id}/domains/shop.test/check`),
      200,
    );
    assert.deepEqual(
      again.records.map((r: any) => r.state),
      again.records.map(() => 'present'),
    );
    assert.equal(again.status, 'ok');
  });

  test("a member checks their own project's domains, not another's; a name that is not a host name is refused before any lookup", async () => {
    expectStatus(await w.member.get(`/projects/${w.a.project.id}/domains/member.test/check`), 200);
    expectStatus(await w.member.get(`/projects/${w.a.project.id}/domains`), 200);
    expectError(
      await w.member.get(`/projects/${w.b.project.id}/domains/member.test/check`),
      404,
      'not_found',
    );
    expectError(await w.member.get(`/projects/${w.b.project.id}/domains`), 404, 'not_found');
    const asked = dns.asked.length;
    // One label, or an empty one, is not the path's form: no such resource.
    expectError(
      await w.owner.get(`/projects/${w.a.project.id}/domains/localhost/check`),
      404,
      'not_found',
    );
    expectError(
      await w.owner.get(`/projects/${w.a.project.id}/domains/not..domain/check`),
      404,
      'not_found',
    );
    // Of the path's form but no host name (an all-digit top label, a label ending in a hyphen): refused, naming the field.
    const numeric = expectError(
      await w.owner.get(`/projects/${w.a.project.id}/domains/example.123/check`),
      422,
      'domain:invalid_value',
    );
    assert.match(numeric.message, /^domain must be a host name/);
    expectError(
      await w.owner.get(`/projects/${w.a.project.id}/domains/bad-.example.com/check`),
      422,
      'domain:invalid_value',
    );
    assert.equal(dns.asked.length, asked, 'no lookup for a refused name');
    expectError(
      await w.owner.get('/projects/p.nosuchproject00000000/domains/shop.test/check'),
      404,
      'not_found',
    );
  });
});
