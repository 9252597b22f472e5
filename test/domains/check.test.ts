/**
 * The domain check (src/domains, operator/domains.ts) against a real DNS server the test runs
 * (test/support/dnsServer.ts), asked through node's resolver as `postern domain check` asks
 * it: DKIM compared by its p=, SPF with every attached provider's include (one record, two
 * records an error, the 10-lookup limit counted through nested includes), DMARC (a parent's
 * record applies), each provider's bounce and verification records, and a lookup that gets no
 * answer never reported as missing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DomainCheck } from '../../src/domains/check.js';
import type { CheckedRecord } from '../../src/domains/checkedRecord.js';
import type { OperatorContext } from '../../src/operator/context.js';
import { addDkimKey, type DkimKeyView } from '../../src/operator/dkim.js';
import { checkDomain, sendingDomains } from '../../src/operator/domains.js';
import { createProject } from '../../src/operator/projects.js';
import { attachProvider } from '../../src/operator/providers.js';
import { DnsServer } from '../support/dnsServer.js';
import {
  createProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';

function record(
  check: DomainCheck,
  purpose: CheckedRecord['purpose'],
  name: string,
  type?: CheckedRecord['type'],
  value?: string,
): CheckedRecord {
  const found = check.records.filter(
    (r) =>
      r.purpose === purpose &&
      r.name === name &&
      (type === undefined || r.type === type) &&
      (value === undefined || r.value === value),
  );
  assert.equal(
    found.length,
    1,
    `one ${purpose} record at ${name}${value ? ` (${value})` : ''}: ${JSON.stringify(check.records.map((r) => [r.purpose, r.type, r.name, r.value]))}`,
  );
  return found[0];
}

const codes = (r: CheckedRecord) => r.problems.map((p) => p.code);

describe('domain check', () => {
  let dns: DnsServer;
  let p: TestPostern;
  let ctx: OperatorContext;

  before(async () => {
    dns = await DnsServer.start();
    p = await startTestPostern({
      config: { dns: { servers: [dns.address], timeout_ms: 500, tries: 1 } },
    });
    ctx = p.ctx;
    // What the providers' includes hold, as small as the lookup count needs.
    dns.set('amazonses.com', 'TXT', ['v=spf1 ip4:199.255.192.0/22 -all']);
    dns.set('sendgrid.net', 'TXT', ['v=spf1 ip4:167.89.0.0/17 -all']);
    dns.set('spf.brevo.com', 'TXT', ['v=spf1 ip4:1.179.112.0/20 ~all']);
    dns.set('mailgun.org', 'TXT', ['v=spf1 include:_spf.mailgun.org ~all']);
    dns.set('_spf.mailgun.org', 'TXT', ['v=spf1 ip4:209.61.151.0/24 ~all']);
  });
  after(async () => {
    await p?.close();
    await dns?.close();
  });

  test('each record present, missing or different, with the exact value to publish', async () => {
    const project = await createProject(ctx, 'records');
    const key = await addDkimKey(ctx, project.id, { domain: 'shop.test', selector: 'pst1' });
    await attachProvider(ctx, project.id, {
      slug: 'provider-a-api',
      apiKey: 'secret',
      region: 'eu-west-1',
    });
    await attachProvider(ctx, project.id, { slug: 'provider-b-api', apiKey: 'secret' });
    await attachProvider(ctx, project.id, { slug: 'provider-f-api', apiKey: 'secret' });
    await attachProvider(ctx, project.id, { slug: 'provider-e-smtp', user: 'u', pass: 'p' });
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: '9',
      tls: 'none',
    });

    dns.set('pst1._domainkey.shop.test', 'TXT', [key.dns_value]);
    dns.set('shop.test', 'TXT', [
      'v=spf1 include:sendgrid.net ~all',
      'brevo-code:0123456789abcdef0123456789abcdef',
      'google-site-verification=abc',
    ]);
    dns.set('s1._domainkey.shop.test', 'CNAME', 's1.domainkey.u1234567.wl123.sendgrid.net');
    dns.set('s2._domainkey.shop.test', 'CNAME', 'elsewhere.example.net');
    dns.set('pm-bounces.shop.test', 'CNAME', 'pm.mtasv.net');

    const check = await checkDomain(ctx, 'Shop.Test.', { projectId: project.id });
    assert.equal(check.domain, 'shop.test');
    assert.deepEqual(check.projects, [project.id]);
    assert.equal(check.status, 'action_needed');

    const dkim = record(check, 'dkim', 'pst1._domainkey.shop.test');
    assert.equal(dkim.state, 'present');
    assert.equal(dkim.value, key.dns_value);
    assert.deepEqual(dkim.required_by, [
      { kind: 'dkim_key', id: key.id, project_id: project.id, slug: null },
    ]);

    // The apex SPF holds SendGrid's include but not Brevo's: the value to publish is the record with it added before ~all.
    const spf = record(check, 'spf', 'shop.test');
    assert.equal(spf.state, 'different');
    assert.deepEqual(spf.found, ['v=spf1 include:sendgrid.net ~all']);
    assert.equal(spf.value, 'v=spf1 include:sendgrid.net include:spf.brevo.com ~all');
    assert.equal(spf.dns_lookups, 2);
    assert.deepEqual(spf.required_by.map((r) => r.slug).sort(), [
      'provider-b-api',
      'provider-f-api',
    ]);

    // SES's custom MAIL FROM domain (mail. by default, the account's region in its MX): nothing published yet.
    const sesSpf = record(check, 'spf', 'mail.shop.test');
    assert.equal(sesSpf.state, 'missing');
    assert.deepEqual(sesSpf.found, []);
    assert.equal(sesSpf.value, 'v=spf1 include:amazonses.com ~all');
    const sesMx = record(check, 'return_path', 'mail.shop.test', 'MX');
    assert.equal(sesMx.state, 'missing');
    assert.equal(sesMx.value, '10 feedback-smtp.eu-west-1.amazonses.com');

    const dmarc = record(check, 'dmarc', '_dmarc.shop.test');
    assert.equal(dmarc.state, 'missing');
    assert.equal(dmarc.value, 'v=DMARC1; p=none; rua=mailto:dmarc-reports@shop.test');

    // SendGrid's CNAMEs: their targets are SendGrid's per account, matched by form.
    const s1 = record(check, 'verification', 's1._domainkey.shop.test');
    assert.equal(s1.state, 'present');
    assert.equal(s1.value_exact, false);
    const s2 = record(check, 'verification', 's2._domainkey.shop.test');
    assert.equal(s2.state, 'different');
    assert.deepEqual(s2.found, ['elsewhere.example.net']);
    assert.equal(s2.value, 's2.domainkey.u<account>.wl<n>.sendgrid.net');

    // Brevo's code among the apex's other TXT records; Postmark's Return-Path CNAME.
    const brevo = record(check, 'verification', 'shop.test', 'TXT');
    assert.equal(brevo.state, 'present');
    assert.deepEqual(brevo.found, ['brevo-code:0123456789abcdef0123456789abcdef']);
    assert.equal(record(check, 'return_path', 'pm-bounces.shop.test', 'CNAME').state, 'present');

    // What Postern cannot check is said, once per provider; the generic relay needs nothing.
    assert.ok(check.notes.some((n) => n.slug === 'provider-a-api' && /Easy DKIM/.test(n.text)));
    assert.ok(check.notes.some((n) => n.slug === 'provider-b-api' && /em<number>/.test(n.text)));
    assert.equal(check.notes.filter((n) => n.slug === 'smtp').length, 0);

    // Published as told, every record is present and the domain is ok.
    dns.set('shop.test', 'TXT', [spf.value, 'brevo-code:0123456789abcdef0123456789abcdef']);
    dns
      .set('mail.shop.test', 'TXT', [sesSpf.value])
      .set('mail.shop.test', 'MX', [
        { priority: 10, exchange: 'feedback-smtp.eu-west-1.amazonses.com' },
      ]);
    dns.set('_dmarc.shop.test', 'TXT', [dmarc.value]);
    dns.set('s2._domainkey.shop.test', 'CNAME', 's2.domainkey.u1234567.wl123.sendgrid.net');
    const again = await checkDomain(ctx, 'shop.test', { projectId: project.id });
    assert.deepEqual(
      again.records.filter((r) => r.state !== 'present').map((r) => [r.purpose, r.name]),
      [],
      'every record present once published',
    );
    assert.equal(again.status, 'ok');
    assert.equal(record(again, 'dmarc', '_dmarc.shop.test').value, dmarc.value);
  });

  test('DKIM compares the p= value: a record split into strings or written with spaces is present, another key or a revoked one is different', async () => {
    const project = await createProject(ctx, 'dkim');
    const rsa = await addDkimKey(ctx, project.id, { domain: 'keys.test', selector: 'a' });
    const ed = await addDkimKey(ctx, project.id, {
      domain: 'ed.keys.test',
      selector: 'b',
      algorithm: 'ed25519',
    });
    const other: DkimKeyView = await addDkimKey(ctx, (await createProject(ctx, 'other')).id, {
      domain: 'keys.test',
      selector: 'a',
    });
    assert.ok(
      rsa.dns_value.length > 255,
      'an RSA 2048 record is longer than one TXT string: the server splits it',
    );
    // The same key with other tags and the base64 broken by spaces.
    const p = rsa.dns_value.split('p=')[1];
    dns.set('a._domainkey.keys.test', 'TXT', [
      `v=DKIM1; t=s; k=rsa; p=${p.slice(0, 100)} ${p.slice(100)}`,
    ]);
    let check = await checkDomain(ctx, 'keys.test', { projectId: project.id });
    let dkim = record(check, 'dkim', 'a._domainkey.keys.test');
    assert.equal(dkim.state, 'present');
    assert.match(dkim.note!, /255-character strings/);

    dns.set('a._domainkey.keys.test', 'TXT', [other.dns_value]);
    check = await checkDomain(ctx, 'keys.test', { projectId: project.id });
    dkim = record(check, 'dkim', 'a._domainkey.keys.test');
    assert.equal(dkim.state, 'different');
    assert.deepEqual(dkim.found, [other.dns_value]);
    assert.equal(dkim.value, rsa.dns_value);
    assert.deepEqual(codes(dkim), ['dkim_key_differs']);

    dns.set('b._domainkey.ed.keys.test', 'TXT', ['v=DKIM1; k=ed25519; p=']);
    check = await checkDomain(ctx, 'ed.keys.test', { projectId: project.id });
    const edRecord = record(check, 'dkim', 'b._domainkey.ed.keys.test');
    assert.equal(edRecord.state, 'different');
    assert.equal(edRecord.value, ed.dns_value);
    assert.match(edRecord.problems[0].message, /revoked/);

    // A subdomain without a key of its own is signed with its parent's: that record is the one it needs.
    check = await checkDomain(ctx, 'news.keys.test', { projectId: project.id });
    dkim = record(check, 'dkim', 'a._domainkey.keys.test');
    assert.match(dkim.note!, /signs mail from news\.keys\.test too/);
  });

  test('two SPF records are an error, and the one record to publish says what both said, with the includes it lacked', async () => {
    const project = await createProject(ctx, 'two spf');
    await attachProvider(ctx, project.id, { slug: 'provider-b-smtp', user: 'apikey', pass: 'x' });
    dns.set('twospf.test', 'TXT', [
      'v=spf1 mx -all',
      'v=spf1 ip4:192.0.2.1 include:spf.brevo.com ~all',
      'v=DMARC1 is not here',
    ]);
    const check = await checkDomain(ctx, 'twospf.test', { projectId: project.id });
    const spf = record(check, 'spf', 'twospf.test');
    assert.equal(spf.state, 'different');
    assert.deepEqual(spf.found, [
      'v=spf1 mx -all',
      'v=spf1 ip4:192.0.2.1 include:spf.brevo.com ~all',
    ]);
    assert.deepEqual(codes(spf), ['spf_multiple_records']);
    assert.equal(spf.problems[0].severity, 'error');
    assert.equal(
      spf.value,
      'v=spf1 mx ip4:192.0.2.1 include:spf.brevo.com include:sendgrid.net -all',
    );
    assert.equal(check.status, 'action_needed');
  });

  test("a provider's older include still serves (Brevo's spf.sendinblue.com), and an include reached only through another does not count", async () => {
    const project = await createProject(ctx, 'aliases');
    await attachProvider(ctx, project.id, { slug: 'provider-f-smtp', user: 'u', pass: 'p' });
    await attachProvider(ctx, project.id, { slug: 'provider-b-api', apiKey: 'k' });
    dns.set('_spf.company.test', 'TXT', ['v=spf1 include:sendgrid.net -all']);
    dns.set('aliases.test', 'TXT', [
      'v=spf1 include:spf.sendinblue.com include:_spf.company.test ~all',
    ]);
    const spf = record(
      await checkDomain(ctx, 'aliases.test', { projectId: project.id }),
      'spf',
      'aliases.test',
    );
    assert.equal(spf.state, 'different');
    assert.equal(
      spf.value,
      'v=spf1 include:spf.sendinblue.com include:_spf.company.test include:sendgrid.net ~all',
    );
  });

  test('more than 10 DNS lookups, counted through nested includes, is a warning on the record', async () => {
    const project = await createProject(ctx, 'lookups');
    await attachProvider(ctx, project.id, { slug: 'provider-b-api', apiKey: 'k' });
    // include:big.test costs 1 + its own 9 (a, mx and seven nested includes, each of a record without lookups); sendgrid.net 1 more.
    dns.set('big.test', 'TXT', [
      `v=spf1 a mx ${Array.from({ length: 7 }, (_, i) => `include:n${i}.big.test`).join(' ')} -all`,
    ]);
    for (let i = 0; i < 7; i++) dns.set(`n${i}.big.test`, 'TXT', [`v=spf1 ip4:192.0.2.${i} -all`]);
    dns.set('lookups.test', 'TXT', ['v=spf1 include:big.test include:sendgrid.net ~all']);
    let spf = record(
      await checkDomain(ctx, 'lookups.test', { projectId: project.id }),
      'spf',
      'lookups.test',
    );
    assert.equal(spf.state, 'present');
    assert.equal(spf.dns_lookups, 11);
    assert.deepEqual(codes(spf), ['spf_too_many_lookups']);
    assert.equal(spf.problems[0].severity, 'warning');
    // One nested include fewer: 10 is allowed.
    dns.set('big.test', 'TXT', [
      `v=spf1 a mx ${Array.from({ length: 6 }, (_, i) => `include:n${i}.big.test`).join(' ')} -all`,
    ]);
    spf = record(
      await checkDomain(ctx, 'lookups.test', { projectId: project.id }),
      'spf',
      'lookups.test',
    );
    assert.equal(spf.dns_lookups, 10);
    assert.deepEqual(codes(spf), []);
  });

  test("DMARC: two records are an error, one without p= is different, a subdomain takes its parent's record", async () => {
    const project = await createProject(ctx, 'dmarc');
    dns.set('_dmarc.dm.test', 'TXT', [
      'v=DMARC1; p=reject; rua=mailto:r@dm.test',
      'v=DMARC1; p=none',
    ]);
    let dmarc = record(
      await checkDomain(ctx, 'dm.test', { projectId: project.id }),
      'dmarc',
      '_dmarc.dm.test',
    );
    assert.equal(dmarc.state, 'different');
    assert.deepEqual(codes(dmarc), ['dmarc_multiple_records']);

    dns.set('_dmarc.dm.test', 'TXT', ['v=DMARC1; rua=mailto:r@dm.test']);
    dmarc = record(
      await checkDomain(ctx, 'dm.test', { projectId: project.id }),
      'dmarc',
      '_dmarc.dm.test',
    );
    assert.equal(dmarc.state, 'different');
    assert.deepEqual(codes(dmarc), ['dmarc_invalid']);

    dns.set('_dmarc.dm.test', 'TXT', ['v=DMARC1; p=quarantine']);
    dmarc = record(
      await checkDomain(ctx, 'dm.test', { projectId: project.id }),
      'dmarc',
      '_dmarc.dm.test',
    );
    assert.equal(dmarc.state, 'present');
    assert.equal(dmarc.value, 'v=DMARC1; p=quarantine');
    assert.deepEqual(codes(dmarc), ['dmarc_no_reports']);

    dmarc = record(
      await checkDomain(ctx, 'mail.eu.dm.test', { projectId: project.id }),
      'dmarc',
      '_dmarc.mail.eu.dm.test',
    );
    assert.equal(dmarc.state, 'present');
    assert.deepEqual(dmarc.found, ['v=DMARC1; p=quarantine']);
    assert.match(dmarc.note!, /the one at _dmarc\.dm\.test applies/);
  });

  test("Mailgun's records go on the account's sending domain; on the domain itself, its MX records are left out", async () => {
    const project = await createProject(ctx, 'mailgun');
    await attachProvider(ctx, project.id, {
      slug: 'provider-c-api',
      apiKey: 'k',
      domain: 'mg.gun.test',
      region: 'EU',
    });
    dns.set('mg.gun.test', 'MX', [
      { priority: 10, exchange: 'mxa.eu.mailgun.org' },
      { priority: 20, exchange: 'mx.other.test' },
    ]);
    dns.set('mg.gun.test', 'TXT', ['v=spf1 include:mailgun.org ~all']);
    let check = await checkDomain(ctx, 'gun.test', { projectId: project.id });
    assert.equal(
      record(check, 'return_path', 'mg.gun.test', 'MX', '10 mxa.eu.mailgun.org').state,
      'present',
    );
    const mxb = record(check, 'return_path', 'mg.gun.test', 'MX', '10 mxb.eu.mailgun.org');
    assert.equal(mxb.state, 'different');
    assert.deepEqual(mxb.found, ['10 mxa.eu.mailgun.org', '20 mx.other.test']);
    const spf = record(check, 'spf', 'mg.gun.test');
    assert.equal(spf.state, 'present');
    assert.equal(spf.dns_lookups, 2, 'mailgun.org and the _spf.mailgun.org it includes');
    // Checking another domain: the account's records are not this domain's, and the check says so.
    check = await checkDomain(ctx, 'other-gun.test', { projectId: project.id });
    assert.equal(check.records.filter((r) => r.purpose === 'return_path').length, 0);
    assert.ok(
      check.notes.some(
        (n) =>
          n.slug === 'provider-c-api' &&
          /mg\.gun\.test, which is not under other-gun\.test/.test(n.text),
      ),
    );
    // The account sending as the domain itself: SPF there, no MX (it would take the domain's mail).
    const apex = await createProject(ctx, 'mailgun apex');
    await attachProvider(ctx, apex.id, { slug: 'provider-c-api', apiKey: 'k', domain: 'gun.test' });
    check = await checkDomain(ctx, 'gun.test', { projectId: apex.id });
    assert.equal(check.records.filter((r) => r.type === 'MX').length, 0);
    assert.equal(record(check, 'spf', 'gun.test').value, 'v=spf1 include:mailgun.org ~all');
  });

  test("a selector needed as a CNAME (SendGrid's s1) and as Postern's DKIM TXT is a conflict on both", async () => {
    const project = await createProject(ctx, 'conflict');
    await addDkimKey(ctx, project.id, { domain: 'clash.test', selector: 's1' });
    await attachProvider(ctx, project.id, { slug: 'provider-b-api', apiKey: 'k' });
    const check = await checkDomain(ctx, 'clash.test', { projectId: project.id });
    assert.deepEqual(codes(record(check, 'dkim', 's1._domainkey.clash.test')), ['name_conflict']);
    assert.deepEqual(codes(record(check, 'verification', 's1._domainkey.clash.test')), [
      'name_conflict',
    ]);
  });

  test('a lookup without an answer is lookup_failed, never missing, and the check is incomplete', async () => {
    const project = await createProject(ctx, 'failing');
    await addDkimKey(ctx, project.id, { domain: 'flaky.test', selector: 'k1' });
    dns.set('flaky.test', 'TXT', ['v=spf1 ~all']);
    dns.set('_dmarc.flaky.test', 'TXT', ['v=DMARC1; p=none; rua=mailto:d@flaky.test']);
    dns.fail('k1._domainkey.flaky.test');
    const check = await checkDomain(ctx, 'flaky.test', { projectId: project.id });
    const dkim = record(check, 'dkim', 'k1._domainkey.flaky.test');
    assert.equal(dkim.state, 'lookup_failed');
    assert.deepEqual(codes(dkim), ['lookup_failed']);
    assert.equal(check.status, 'incomplete');
    dns.fail('k1._domainkey.flaky.test', false);
  });

  test('without a project: every project that signs for the domain or has sent from it; a domain nobody knows gets SPF and DMARC only', async () => {
    const signer = await createProject(ctx, 'signer');
    const key = await addDkimKey(ctx, signer.id, { domain: 'both.test', selector: 'sig' });
    const sender = await createProjectWithKeys(ctx, 'sender');
    await attachProvider(ctx, sender.project.id, {
      slug: 'provider-d-api',
      apiKey: 'k',
      region: 'eu-west-1',
    });
    const sent = await post(p.sandbox, '/v1/send', {
      key: sender.testKey,
      json: validMessage({ from: 'News <news@Both.test>' }),
    });
    assert.equal(sent.status, 202, sent.text);
    assert.deepEqual((await sendingDomains(ctx, sender.project.id)).domains, [
      { domain: 'both.test', dkim_keys: [], sent_from: true },
    ]);
    assert.deepEqual((await sendingDomains(ctx, signer.id)).domains, [
      { domain: 'both.test', dkim_keys: [{ id: key.id, selector: 'sig' }], sent_from: false },
    ]);

    const check = await checkDomain(ctx, 'both.test');
    assert.deepEqual(check.projects, [signer.id, sender.project.id].sort());
    assert.equal(record(check, 'dkim', 'sig._domainkey.both.test').state, 'missing');
    assert.equal(
      record(check, 'return_path', 'send.both.test', 'MX').value,
      '10 feedback-smtp.eu-west-1.amazonses.com',
    );
    assert.equal(record(check, 'spf', 'send.both.test').value, 'v=spf1 include:amazonses.com ~all');

    const nobody = await checkDomain(ctx, 'nobody.test');
    assert.deepEqual(nobody.projects, []);
    assert.deepEqual(
      nobody.records.map((r) => [r.purpose, r.name]),
      [
        ['spf', 'nobody.test'],
        ['dmarc', '_dmarc.nobody.test'],
      ],
    );
    assert.match(nobody.notes[0].text, /No project has a DKIM key for nobody\.test/);
  });

  test('a name that is not a host name is refused before any lookup', async () => {
    const asked = dns.asked.length;
    await assert.rejects(checkDomain(ctx, 'not a domain'), /DOMAIN must be a host name/);
    await assert.rejects(checkDomain(ctx, 'localhost'), /DOMAIN must be a host name/);
    assert.equal(dns.asked.length, asked);
  });
});
