/**
 * tls.acme (issue 37) against Pebble, Let's Encrypt's ACME test server: a node with no
 * certificate obtains one over HTTP-01 and over TLS-ALPN-01, serves it on its SMTP listeners
 * (STARTTLS and implicit TLS) and its HTTPS send listener, where clients that trust only Pebble's
 * root (Python's smtplib, Node's fetch) accept it; renews it once the injected clock says two
 * thirds of its life have passed, while a connection opened before keeps the old one; keeps
 * serving it while Pebble is down (the failure logged and counted on /metrics, /readyz still
 * ready), and orders again after the backoff once Pebble is back; and a restart serves the stored
 * certificate without ordering.
 */
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, type TLSSocket } from 'node:tls';
import { ManualClock } from '../../src/clock.js';
import { RETRY_MIN_MS, renewalTime } from '../../src/tls/acmeCertificates.js';
import { freePort, pebbleUnavailable, startPebble, type TestPebble } from '../support/pebble.js';
import { get, startTestPostern, type TestPostern, tempStateDir } from '../support/postern.js';
import { parseExposition } from '../support/prometheusText.js';
import { nodeFetch, pythonSmtp, servedCertificate } from '../support/tlsClients.js';

/** Serial numbers as hex without leading zeros (Python and Node print them differently). */
const serialOf = (hex: string) => hex.replace(/^0+/, '').toUpperCase();

function acmeListeners(httpsPort: number) {
  return [
    {
      name: 'http-production',
      protocol: 'http',
      environment: 'production',
      host: '127.0.0.1',
      port: httpsPort,
      acme: true,
    },
    { name: 'http-sandbox', protocol: 'http', environment: 'sandbox', host: '127.0.0.1', port: 0 },
    {
      name: 'smtp-production-starttls',
      protocol: 'smtp',
      environment: 'production',
      host: '127.0.0.1',
      port: 0,
      tls: 'starttls',
      acme: true,
    },
    {
      name: 'smtp-production-implicit',
      protocol: 'smtp',
      environment: 'production',
      host: '127.0.0.1',
      port: 0,
      tls: 'implicit',
      acme: true,
    },
    { name: 'console', protocol: 'console', host: '127.0.0.1', port: 0 },
  ];
}

/** One HTTP/1.1 request on an open TLS connection; resolves with the status line's code. */
function requestOn(socket: TLSSocket, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (text.length < end + 4 + length) return;
      socket.off('data', onData);
      socket.off('error', reject);
      resolve(Number(text.slice(9, 12)));
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`);
  });
}

function openConnection(port: number, name: string, root: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect(
      { host: '127.0.0.1', port, servername: name, ca: root, ALPNProtocols: ['http/1.1'] },
      () => resolve(socket),
    );
    socket.once('error', reject);
  });
}

async function metrics(server: TestPostern): Promise<Map<string, number>> {
  const res = await get(server.console, '/metrics');
  assert.equal(res.status, 200);
  return parseExposition(res.text);
}

describe('tls.acme over HTTP-01 against Pebble', { skip: pebbleUnavailable() }, () => {
  const domains = ['mail.postern.test', 'api.postern.test'];
  const name = domains[0]!;
  let pebble: TestPebble;
  let server: TestPostern | null = null;
  let plainPort: number;
  let httpsPort: number;
  const stateDir = tempStateDir('postern-acme-http-');
  const clock = new ManualClock(Date.now());

  const start = async () =>
    startTestPostern({
      clock,
      stateDir,
      config: {
        listeners: acmeListeners(httpsPort),
        http: { redirect_plain: { host: '127.0.0.1', port: plainPort } },
        tls: {
          acme: {
            directory_url: pebble.directoryUrl,
            email: 'ops@postern.test',
            domains,
            challenge: 'http-01',
            directory_ca: pebble.directoryCaFile,
          },
        },
      },
    });

  before(async () => {
    plainPort = await freePort();
    httpsPort = await freePort();
    pebble = await startPebble({ httpPort: plainPort, tlsPort: httpsPort });
  });
  after(async () => {
    await server?.close();
    await pebble?.close();
  });

  test('a node without a certificate obtains one at start and serves it on SMTP (STARTTLS and implicit) and HTTPS; clients trusting only the CA accept it', async () => {
    server = await start();
    const acme = server.running.certificates!;
    // The order started with the listeners; this waits for it (or checks again, finding it fresh).
    assert.ok(['obtained', 'fresh'].includes(await acme.check()));
    assert.equal(acme.certificate.placeholder, false);
    const pair = acme.certificate.pair;
    assert.deepEqual(pair.names.sort(), [...domains].sort());
    const root = await pebble.root();

    for (const mode of ['starttls', 'implicit'] as const) {
      const port = server.smtp.production[mode];
      const smtp = await pythonSmtp(name, port, mode, root);
      assert.equal(smtp.ok, true, `${mode}: ${smtp.error}`);
      assert.equal(serialOf(smtp.serial!), serialOf(pair.serial), mode);
      assert.equal(smtp.auth, true, `${mode}: AUTH offered once encrypted`);
    }
    const fetched = await nodeFetch(
      'api.postern.test',
      `https://api.postern.test:${httpsPort}/healthz`,
      root,
    );
    assert.equal(fetched.ok, true, fetched.error);
    assert.equal(fetched.status, 200);
    assert.equal(server.production, `https://127.0.0.1:${httpsPort}`);
    // The same clients refuse a chain they were not told to trust: the checks above can fail.
    const untrusted = await pythonSmtp(
      name,
      server.smtp.production.implicit,
      'implicit',
      readFileSync(pebble.directoryCaFile, 'utf8'),
    );
    assert.equal(untrusted.ok, false);
    assert.match(untrusted.error!, /CERTIFICATE_VERIFY_FAILED|certificate verify failed/);

    // Stored in the state directory, private.
    const file = path.join(stateDir, 'certs', `acme-${name}.pem`);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(path.join(stateDir, 'certs', 'acme-account.key')).mode & 0o777, 0o600);
    const ready = await get(server.console, '/readyz');
    assert.equal(ready.status, 200);
    assert.equal(ready.body.checks.certificates.ok, true);
    const figures = await metrics(server);
    assert.equal(
      figures.get(`postern_certificate_expiry_seconds{name=${name}}`),
      Math.floor(pair.notAfter / 1000),
    );
    assert.equal(figures.get(`postern_certificate_order_failures_total{name=${name}}`), 0);
  });

  test('two thirds into its life (the injected clock) it is renewed and swapped in: new connections get the new one, an open one keeps the old', async () => {
    const acme = server!.running.certificates!;
    const old = acme.certificate.pair;
    const root = await pebble.root();
    const kept = await openConnection(httpsPort, 'api.postern.test', root);
    try {
      assert.equal(await requestOn(kept, 'api.postern.test'), 200);
      // Just before the renewal time nothing is ordered.
      clock.set(renewalTime(old) - 60_000);
      assert.equal(await acme.check(), 'fresh');
      assert.equal(acme.certificate.pair.serial, old.serial);

      clock.set(renewalTime(old) + 60_000);
      assert.equal(await acme.check(), 'obtained');
      const renewed = acme.certificate.pair;
      assert.notEqual(renewed.serial, old.serial);
      assert.ok(renewed.notAfter > old.notAfter);

      assert.equal(
        serialOf((await servedCertificate(httpsPort, 'api.postern.test', root)).serialNumber),
        serialOf(renewed.serial),
      );
      const smtp = await pythonSmtp(name, server!.smtp.production.starttls, 'starttls', root);
      assert.equal(smtp.ok, true, smtp.error);
      assert.equal(serialOf(smtp.serial!), serialOf(renewed.serial));
      // The connection opened before the renewal still works, on the certificate it started with.
      assert.equal(await requestOn(kept, 'api.postern.test'), 200);
      assert.equal(serialOf(kept.getPeerCertificate().serialNumber), serialOf(old.serial));
    } finally {
      kept.destroy();
    }
  });

  test('while Pebble is down the certificate served so far is kept: the failure is counted, /readyz stays ready; after the backoff it is renewed again', async () => {
    const acme = server!.running.certificates!;
    const current = acme.certificate.pair;
    const root = await pebble.root();
    await pebble.stop();
    // Due (and past the pause after this node's last order).
    clock.set(Math.max(renewalTime(current), clock.now() + RETRY_MIN_MS) + 60_000);
    assert.equal(await acme.check(), 'failed');
    assert.equal(acme.certificate.pair.serial, current.serial);
    assert.ok(acme.lastError);
    assert.equal(await pebble.root().catch(() => null), null, 'Pebble is down');

    const ready = await get(server!.console, '/readyz');
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    const figures = await metrics(server!);
    assert.equal(figures.get(`postern_certificate_order_failures_total{name=${name}}`), 1);
    assert.equal(
      figures.get(`postern_certificate_expiry_seconds{name=${name}}`),
      Math.floor(current.notAfter / 1000),
    );
    // Still served to clients, and still verifying.
    const smtp = await pythonSmtp(name, server!.smtp.production.implicit, 'implicit', root);
    assert.equal(smtp.ok, true, smtp.error);
    assert.equal(serialOf(smtp.serial!), serialOf(current.serial));

    // Pebble back: nothing is ordered before the backoff has passed.
    await pebble.start();
    assert.equal(await acme.check(), 'waiting');
    clock.advance(RETRY_MIN_MS);
    assert.equal(await acme.check(), 'obtained');
    const newRoot = await pebble.root();
    const after = await pythonSmtp(name, server!.smtp.production.implicit, 'implicit', newRoot);
    assert.equal(after.ok, true, after.error);
    assert.equal(serialOf(after.serial!), serialOf(acme.certificate.pair.serial));
    assert.notEqual(acme.certificate.pair.serial, current.serial);
  });

  test('a restart serves the stored certificate at once, without ordering (Pebble down)', async () => {
    const served = server!.running.certificates!.certificate.pair;
    await server!.close();
    server = null;
    await pebble.stop();
    // A day into the stored certificate's life: not due.
    clock.set(served.notBefore + 86_400_000);
    server = await start();
    const acme = server.running.certificates!;
    assert.equal(acme.certificate.placeholder, false);
    assert.equal(acme.certificate.pair.serial, served.serial);
    assert.equal(await acme.check(), 'fresh');
    assert.equal((await get(server.console, '/readyz')).status, 200);
  });
});

describe('tls.acme over TLS-ALPN-01 against Pebble', { skip: pebbleUnavailable() }, () => {
  const domains = ['alpn.postern.test'];
  let pebble: TestPebble;
  let server: TestPostern | null = null;

  after(async () => {
    await server?.close();
    await pebble?.close();
  });

  test('the HTTPS listener answers acme-tls/1 with the challenge certificate; the certificate obtained is served on SMTP and HTTPS', async () => {
    const httpsPort = await freePort();
    // Nothing answers http-01: only TLS-ALPN-01 can succeed.
    pebble = await startPebble({ httpPort: await freePort(), tlsPort: httpsPort });
    server = await startTestPostern({
      clock: new ManualClock(Date.now()),
      config: {
        listeners: acmeListeners(httpsPort),
        tls: {
          acme: {
            directory_url: pebble.directoryUrl,
            email: 'ops@postern.test',
            domains,
            challenge: 'tls-alpn-01',
            directory_ca: pebble.directoryCaFile,
          },
        },
      },
    });
    const acme = server.running.certificates!;
    assert.ok(['obtained', 'fresh'].includes(await acme.check()), acme.lastError ?? '');
    assert.equal(acme.certificate.placeholder, false);
    const root = await pebble.root();
    const fetched = await nodeFetch(
      domains[0]!,
      `https://${domains[0]}:${httpsPort}/healthz`,
      root,
    );
    assert.equal(fetched.ok, true, fetched.error);
    assert.equal(fetched.status, 200);
    for (const mode of ['starttls', 'implicit'] as const) {
      const smtp = await pythonSmtp(domains[0]!, server.smtp.production[mode], mode, root);
      assert.equal(smtp.ok, true, `${mode}: ${smtp.error}`);
      assert.equal(serialOf(smtp.serial!), serialOf(acme.certificate.pair.serial));
    }
    // An ordinary client of the same name meanwhile gets the served certificate, not a challenge's.
    assert.equal(
      serialOf((await servedCertificate(httpsPort, domains[0]!, root)).serialNumber),
      serialOf(acme.certificate.pair.serial),
    );
  });
});

describe('tls.acme when the CA cannot be reached at the first start', {
  skip: pebbleUnavailable(),
}, () => {
  const domains = ['first.postern.test'];
  let pebble: TestPebble;
  let server: TestPostern | null = null;

  after(async () => {
    await server?.close();
    await pebble?.close();
  });

  test('the listeners serve a placeholder and /readyz fails naming why, until the first certificate arrives after the backoff', async () => {
    const httpsPort = await freePort();
    pebble = await startPebble({ httpPort: await freePort(), tlsPort: httpsPort });
    await pebble.stop();
    const clock = new ManualClock(Date.now());
    server = await startTestPostern({
      clock,
      config: {
        listeners: acmeListeners(httpsPort),
        tls: {
          acme: {
            directory_url: pebble.directoryUrl,
            email: 'ops@postern.test',
            domains,
            challenge: 'tls-alpn-01',
            directory_ca: pebble.directoryCaFile,
          },
        },
      },
    });
    const acme = server.running.certificates!;
    assert.ok(['failed', 'waiting'].includes(await acme.check()));
    assert.equal(acme.certificate.placeholder, true);
    const notReady = await get(server.console, '/readyz');
    assert.equal(notReady.status, 503);
    assert.deepEqual(notReady.body.failing, ['certificates']);
    assert.match(
      notReady.body.checks.certificates.detail,
      /first\.postern\.test: no certificate yet \(ACME order pending; the last order failed: .+\)/,
    );
    const figures = await metrics(server);
    assert.equal(figures.get(`postern_certificate_order_failures_total{name=${domains[0]}}`), 1);
    assert.equal(
      figures.has(`postern_certificate_expiry_seconds{name=${domains[0]}}`),
      false,
      'no expiry for a placeholder',
    );

    await pebble.start();
    assert.equal(await acme.check(), 'waiting');
    clock.advance(RETRY_MIN_MS);
    assert.equal(await acme.check(), 'obtained');
    assert.equal((await get(server.console, '/readyz')).status, 200);
    const smtp = await pythonSmtp(
      domains[0]!,
      server.smtp.production.implicit,
      'implicit',
      await pebble.root(),
    );
    assert.equal(smtp.ok, true, smtp.error);
  });
});
