/**
 * `postern domain check DOMAIN [--project ID] [--json]`, the real CLI against a DNS server the
 * test runs (test/support/dnsServer.ts, named in the config's dns.servers): records present,
 * missing and different each reported with the value to publish, the JSON exactly the console
 * document's DomainCheck (its stable, documented shape), the report a person reads, and the
 * refusals.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv2020, type AnySchemaObject } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { consoleDoc } from '../support/console.js';
import { DnsServer } from '../support/dnsServer.js';
import { tempDirs } from '../support/hooks.js';
import { type CliResult, runCli } from '../support/postern.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const ajv = addFormats(new Ajv2020({ allErrors: true, strict: false }));
ajv.addKeyword({ keyword: 'x-error-codes', schemaType: 'object' });
ajv.addSchema(consoleDoc as unknown as AnySchemaObject, 'console');
const domainCheckSchema = ajv.compile({ $ref: 'console#/components/schemas/DomainCheck' });
/** Whether a value is the document's DomainCheck (a plain boolean: the answer keeps its type). */
const isDomainCheck = (value: unknown): boolean => domainCheckSchema(value);

const dirs = tempDirs('postern-domain-');

describe('postern domain check', () => {
  let dns: DnsServer;
  let env: Record<string, string>;
  let projectId: string;
  let dkimValue: string;

  const cli = (args: string[]) => runCli(args, env);
  async function ok(args: string[]): Promise<any> {
    const r = await cli([...args, '--json']);
    assert.equal(r.code, 0, `postern ${args.join(' ')} exited ${r.code}: ${r.stdout}${r.stderr}`);
    return r.json;
  }
  const recordOf = (check: any, purpose: string, name: string, type = 'TXT') => {
    const found = check.records.filter(
      (r: any) => r.purpose === purpose && r.name === name && r.type === type,
    );
    assert.equal(found.length, 1, `one ${purpose} ${type} record at ${name}`);
    return found[0];
  };

  before(async () => {
    dns = await DnsServer.start();
    const stateDir = dirs();
    const config = path.join(dirs(), 'postern.json');
    writeFileSync(
      config,
      JSON.stringify({ dns: { servers: [dns.address], timeout_ms: 500, tries: 1 } }),
    );
    env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: config };
    projectId = (await ok(['project', 'create', '--name', 'Shop'])).id;
    dkimValue = (
      await ok([
        'dkim',
        'add',
        '--project',
        projectId,
        '--domain',
        'shop.test',
        '--selector',
        'mail2026',
      ])
    ).dns_value;
    await ok([
      'provider',
      'attach',
      '--project',
      projectId,
      '--slug',
      'provider-a-smtp',
      '--user',
      'AKIA',
      '--pass',
      'secret',
      '--region',
      'eu-central-1',
    ]);
    await ok([
      'provider',
      'attach',
      '--project',
      projectId,
      '--slug',
      'provider-g-smtp',
      '--user',
      'me@shop.test',
      '--pass',
      'app-password',
    ]);
    dns.set('amazonses.com', 'TXT', ['v=spf1 ip4:199.255.192.0/22 -all']);
    dns.set('_spf.google.com', 'TXT', ['v=spf1 include:_netblocks.google.com ~all']);
    dns.set('_netblocks.google.com', 'TXT', ['v=spf1 ip4:35.190.247.0/24 ~all']);
    // Present: the DKIM key. Different: the SPF record lacks Google's include, the DMARC record has no policy. Missing: SES's MAIL FROM records.
    dns.set('mail2026._domainkey.shop.test', 'TXT', [dkimValue]);
    dns.set('shop.test', 'TXT', ['v=spf1 mx -all']);
    dns.set('_dmarc.shop.test', 'TXT', ['v=DMARC1; rua=mailto:reports@shop.test']);
  });
  after(async () => {
    await dns?.close();
  });

  test('--json: each record present, missing or different with the value to publish, in the documented DomainCheck shape', async () => {
    const r = await cli(['domain', 'check', 'shop.test', '--project', projectId, '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(
      r.stdout.endsWith('}\n') && !r.stdout.slice(0, -1).includes('\n'),
      'one JSON object on one line',
    );
    assert.ok(isDomainCheck(r.json), `DomainCheck: ${ajv.errorsText(domainCheckSchema.errors)}`);
    const check = r.json;
    assert.equal(check.domain, 'shop.test');
    assert.deepEqual(check.projects, [projectId]);
    assert.equal(check.status, 'action_needed');
    assert.deepEqual(
      check.records.map((x: any) => [x.purpose, x.type, x.name, x.state]),
      [
        ['dkim', 'TXT', 'mail2026._domainkey.shop.test', 'present'],
        ['spf', 'TXT', 'shop.test', 'different'],
        ['spf', 'TXT', 'mail.shop.test', 'missing'],
        ['dmarc', 'TXT', '_dmarc.shop.test', 'different'],
        ['return_path', 'MX', 'mail.shop.test', 'missing'],
      ],
    );
    assert.equal(recordOf(check, 'dkim', 'mail2026._domainkey.shop.test').value, dkimValue);
    const spf = recordOf(check, 'spf', 'shop.test');
    assert.deepEqual(spf.found, ['v=spf1 mx -all']);
    assert.equal(spf.value, 'v=spf1 mx include:_spf.google.com -all');
    assert.equal(spf.dns_lookups, 3);
    assert.equal(
      recordOf(check, 'spf', 'mail.shop.test').value,
      'v=spf1 include:amazonses.com ~all',
    );
    assert.equal(
      recordOf(check, 'return_path', 'mail.shop.test', 'MX').value,
      '10 feedback-smtp.eu-central-1.amazonses.com',
    );
    const dmarc = recordOf(check, 'dmarc', '_dmarc.shop.test');
    assert.deepEqual(dmarc.found, ['v=DMARC1; rua=mailto:reports@shop.test']);
    assert.equal(dmarc.value, 'v=DMARC1; p=none; rua=mailto:dmarc-reports@shop.test');
    assert.deepEqual(
      dmarc.problems.map((p: any) => p.code),
      ['dmarc_invalid'],
    );
    assert.ok(
      check.notes.some(
        (n: any) => n.slug === 'provider-g-smtp' && /google\._domainkey/.test(n.text),
      ),
    );
  });

  test('without --json: a report a person reads, naming what to publish where', async () => {
    const r = await cli(['domain', 'check', 'shop.test', '--project', projectId]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    assert.equal(lines[0], `shop.test: action needed (projects ${projectId})`);
    assert.match(r.stdout, /^present +dkim +TXT +mail2026\._domainkey\.shop\.test$/m);
    assert.match(
      r.stdout,
      /^MISSING +spf +TXT +mail\.shop\.test\n +publish: v=spf1 include:amazonses\.com ~all$/m,
    );
    assert.match(
      r.stdout,
      /^DIFFERENT +spf +TXT +shop\.test\n +found: +v=spf1 mx -all\n +publish: v=spf1 mx include:_spf\.google\.com -all$/m,
    );
    assert.match(
      r.stdout,
      /^MISSING +return_path +MX +mail\.shop\.test\n +publish: 10 feedback-smtp\.eu-central-1\.amazonses\.com$/m,
    );
    assert.match(r.stdout, /error: The DMARC record has no valid p=/);
    assert.match(r.stdout, /^Not checked:\n {2}- provider-a-smtp: SES sends from the domain once/m);
  });

  test('published as it said, every record is present and the status ok', async () => {
    const before = await ok(['domain', 'check', 'shop.test', '--project', projectId]);
    dns.set('shop.test', 'TXT', [recordOf(before, 'spf', 'shop.test').value]);
    dns.set('mail.shop.test', 'TXT', [recordOf(before, 'spf', 'mail.shop.test').value]);
    dns.set('mail.shop.test', 'MX', [
      { priority: 10, exchange: 'feedback-smtp.eu-central-1.amazonses.com' },
    ]);
    dns.set('_dmarc.shop.test', 'TXT', [recordOf(before, 'dmarc', '_dmarc.shop.test').value]);
    const check = await ok(['domain', 'check', 'shop.test']);
    assert.deepEqual(
      check.projects,
      [projectId],
      'without --project: the project that signs for the domain',
    );
    assert.deepEqual(
      check.records.map((x: any) => x.state),
      ['present', 'present', 'present', 'present', 'present'],
    );
    assert.equal(check.status, 'ok');
    const text = await cli(['domain', 'check', 'shop.test']);
    assert.match(text.stdout, /^shop\.test: ok /);
  });

  test('refusals: no DOMAIN is a usage error (2), a name that is not a host name or an unknown project is refused (1)', async () => {
    const usage = await cli(['domain', 'check', '--json']);
    assert.equal(usage.code, 2);
    assert.equal(usage.json.error.code, 'usage');
    const bad: CliResult = await cli(['domain', 'check', 'not_a domain', '--json']);
    assert.equal(bad.code, 1);
    assert.equal(bad.json.error.code, 'invalid_argument');
    assert.match(bad.json.error.message, /DOMAIN must be a host name/);
    const unknown = await cli([
      'domain',
      'check',
      'shop.test',
      '--project',
      'p.nosuchproject00000000',
      '--json',
    ]);
    assert.equal(unknown.code, 1);
    assert.equal(unknown.json.error.code, 'not_found');
    const help = await cli(['domain', 'check', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^usage: postern domain check DOMAIN \[--project ID\]/);
  });
});
