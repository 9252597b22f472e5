/**
 * The config's TLS sections (issue 37): the defaults are unchanged (no ACME, no plain listener,
 * plain HTTP send listeners), and every combination that could not serve what it says is
 * refused before anything starts, naming the key at fault.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/configError.js';
import { buildConfig } from '../../src/config/load.js';
import { repoRoot } from '../support/paths.js';

const acme = (extra: Record<string, unknown> = {}) => ({
  directory_url: 'https://acme.example/directory',
  email: 'ops@example.com',
  domains: ['mail.example.com'],
  challenge: 'tls-alpn-01',
  ...extra,
});
const https = (extra: Record<string, unknown> = {}) => ({
  name: 'api',
  protocol: 'http',
  environment: 'production',
  port: 443,
  ...extra,
});
const smtp = (extra: Record<string, unknown> = {}) => ({
  name: 'smtp',
  protocol: 'smtp',
  environment: 'production',
  port: 465,
  tls: 'implicit',
  ...extra,
});

function refused(raw: Record<string, unknown>, key: string, message: RegExp): void {
  assert.throws(
    () => buildConfig({ state_dir: '/tmp/unused', ...raw }, {}),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.equal(err.key, key, err.message);
      assert.match(err.message, message);
      return true;
    },
  );
}

test('the shipped config and the embedded defaults have no ACME, no plain listener and no TLS on the send listeners', () => {
  for (const raw of [
    {},
    JSON.parse(readFileSync(path.join(repoRoot, 'config', 'default.json'), 'utf8')) as Record<
      string,
      unknown
    >,
  ]) {
    const config = buildConfig(raw, {});
    assert.equal(config.tls.acme, null);
    assert.equal(config.http.redirect_plain, null);
    for (const l of config.listeners) {
      assert.equal(l.acme, false, l.name);
      assert.equal(l.cert, null, l.name);
    }
  }
});

test('a complete tls.acme with an HTTPS listener and SMTP listeners naming it is taken as written', () => {
  const config = buildConfig(
    {
      state_dir: '/tmp/unused',
      listeners: [
        https({ acme: true }),
        smtp({ acme: true }),
        { name: 'web', protocol: 'http', environment: 'sandbox', port: 8081 },
      ],
      http: { redirect_plain: { port: 80 } },
      tls: {
        acme: acme({ challenge: 'http-01', domains: ['mail.example.com', 'api.example.com'] }),
      },
    },
    {},
  );
  assert.deepEqual(config.tls.acme, {
    ...acme({ challenge: 'http-01', domains: ['mail.example.com', 'api.example.com'] }),
    directory_ca: null,
  });
  assert.deepEqual(config.http.redirect_plain, { host: '0.0.0.0', port: 80, to: null });
});

test('cert and key: both or neither, on HTTP and console listeners only, never with acme', () => {
  refused(
    { listeners: [https({ cert: '/a.crt' })] },
    'listeners.0.key',
    /cert and listeners\.0\.key must be set together/,
  );
  refused({ listeners: [https({ key: '/a.key' })] }, 'listeners.0.cert', /set together/);
  refused(
    { listeners: [smtp({ cert: '/a.crt', key: '/a.key' })] },
    'listeners.0.cert',
    /SMTP listener serves smtp\.tls/,
  );
  refused(
    { listeners: [https({ cert: '/a.crt', key: '/a.key', acme: true })], tls: { acme: acme() } },
    'listeners.0.acme',
    /choose one/,
  );
});

test('acme: true needs tls.acme, and tls.acme needs a listener that serves it', () => {
  refused({ listeners: [https({ acme: true })] }, 'listeners.0.acme', /needs tls\.acme/);
  refused(
    { listeners: [https()], tls: { acme: acme() } },
    'tls.acme',
    /no listener serves its certificate/,
  );
});

test('each challenge needs the listener that answers it: http-01 the plain listener, tls-alpn-01 an HTTPS one', () => {
  refused(
    { listeners: [https({ acme: true })], tls: { acme: acme({ challenge: 'http-01' }) } },
    'tls.acme.challenge',
    /http\.redirect_plain, which is not set/,
  );
  refused(
    { listeners: [https(), smtp({ acme: true })], tls: { acme: acme() } },
    'tls.acme.challenge',
    /tls-alpn-01 is answered on port 443 by an HTTP or console listener/,
  );
});

test('tls.acme: an https directory, an address, lower-case host names without wildcards or IP addresses, a known challenge', () => {
  const base = { listeners: [https({ acme: true })] };
  refused(
    { ...base, tls: { acme: acme({ directory_url: 'http://acme.example/directory' }) } },
    'tls.acme.directory_url',
    /pattern/,
  );
  refused({ ...base, tls: { acme: acme({ email: 'ops' }) } }, 'tls.acme.email', /pattern/);
  refused({ ...base, tls: { acme: acme({ domains: [] }) } }, 'tls.acme.domains', /fewer than 1/);
  for (const bad of ['*.example.com', '192.0.2.1', 'Mail.Example.com', 'localhost', 'a..b']) {
    refused(
      { ...base, tls: { acme: acme({ domains: ['ok.example.com', bad] }) } },
      'tls.acme.domains.1',
      /pattern/,
    );
  }
  refused(
    { ...base, tls: { acme: acme({ challenge: 'dns-01' }) } },
    'tls.acme.challenge',
    /allowed values/,
  );
  refused(
    { ...base, tls: { acme: { domains: ['a.example.com'] } } },
    'tls.acme.directory_url',
    /required/,
  );
});

test('http.redirect_plain points to a listener that serves HTTPS', () => {
  refused(
    { listeners: [https()], http: { redirect_plain: { port: 80 } } },
    'http.redirect_plain',
    /no HTTP or console listener serves HTTPS/,
  );
  refused(
    {
      listeners: [
        https({ cert: '/a.crt', key: '/a.key' }),
        { name: 'plain', protocol: 'http', environment: 'sandbox', port: 81 },
      ],
      http: { redirect_plain: { port: 80, to: 'plain' } },
    },
    'http.redirect_plain.to',
    /"plain" is not an HTTP or console listener that serves HTTPS/,
  );
  const config = buildConfig(
    {
      state_dir: '/tmp/unused',
      listeners: [https({ cert: '/a.crt', key: '/a.key' })],
      http: { redirect_plain: { port: 80, to: 'api' } },
    },
    {},
  );
  assert.equal(config.http.redirect_plain?.to, 'api');
});
