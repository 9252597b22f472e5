/**
 * tls.acme on two nodes sharing a PostgreSQL database (issue 37): started together without a
 * certificate, exactly one orders (an advisory lock) and both serve the certificate it stored;
 * when the other node renews, the CA's TLS-ALPN-01 validation reaches the first node, which
 * answers the challenge from the database, and the first node then takes up the renewed
 * certificate without ordering.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ManualClock } from '../../src/clock.js';
import { renewalTime } from '../../src/tls/acmeCertificates.js';
import { capturedLogger } from '../support/fromAddress.js';
import { freePort, pebbleUnavailable, startPebble, type TestPebble } from '../support/pebble.js';
import { startTestPostern, type TestPostern } from '../support/postern.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  sharedPostgres,
} from '../support/postgres.js';
import { pythonSmtp, servedCertificate } from '../support/tlsClients.js';

const serialOf = (hex: string) => hex.replace(/^0+/, '').toUpperCase();
const ordering = (lines: Record<string, unknown>[]) =>
  lines.filter((l) => l.msg === 'ordering a certificate (ACME)').length;

describe('tls.acme on two nodes sharing PostgreSQL', {
  skip: postgresUnavailable() || pebbleUnavailable(),
}, () => {
  const domains = ['cluster.postern.test'];
  const name = domains[0]!;
  let pebble: TestPebble;
  let database: FreshDatabase;
  const nodes: {
    server: TestPostern;
    clock: ManualClock;
    log: ReturnType<typeof capturedLogger>;
    httpsPort: number;
  }[] = [];

  before(async () => {
    database = await freshDatabase((await sharedPostgres()).url);
    const ports = [await freePort(), await freePort()];
    // The CA validates on node-1's HTTPS port only.
    pebble = await startPebble({ httpPort: await freePort(), tlsPort: ports[0]! });
    const started = await Promise.all(
      ports.map(async (httpsPort, i) => {
        const clock = new ManualClock(Date.now());
        const log = capturedLogger('info');
        const server = await startTestPostern({
          clock,
          logger: log.logger,
          config: {
            store: { backend: 'postgres', postgres: { url: database.url, pool_size: 6 } },
            node: { id: `node-${i + 1}` },
            listeners: [
              {
                name: 'http-production',
                protocol: 'http',
                environment: 'production',
                host: '127.0.0.1',
                port: httpsPort,
                acme: true,
              },
              {
                name: 'http-sandbox',
                protocol: 'http',
                environment: 'sandbox',
                host: '127.0.0.1',
                port: 0,
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
            ],
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
        return { server, clock, log, httpsPort };
      }),
    );
    nodes.push(...started);
  });
  after(async () => {
    for (const node of nodes) await node.server.close();
    await pebble?.close();
    await database?.drop();
  });

  test('started together without a certificate, one node orders and both serve what it stored', async () => {
    // Each node's first check (begun with its listeners) has ended: the one that waited for the
    // lock found the certificate stored.
    const results = await Promise.all(nodes.map((n) => n.server.running.certificates!.check()));
    for (const r of results) assert.ok(['obtained', 'adopted', 'fresh'].includes(r), r);
    assert.equal(
      ordering(nodes[0]!.log.lines) + ordering(nodes[1]!.log.lines),
      1,
      'exactly one order',
    );
    const [a, b] = nodes.map((n) => n.server.running.certificates!.certificate);
    assert.equal(a!.placeholder, false);
    assert.equal(b!.placeholder, false);
    assert.equal(a!.pair.serial, b!.pair.serial);

    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const rows = (
        await client.query<{ name: string; obtained_by: string }>(
          'SELECT name, obtained_by FROM tls_certificates',
        )
      ).rows;
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.name, name);
      const orderer = ordering(nodes[0]!.log.lines) === 1 ? 'node-1' : 'node-2';
      assert.equal(rows[0]!.obtained_by, orderer);
    } finally {
      await client.end();
    }
    const root = await pebble.root();
    for (const node of nodes) {
      const smtp = await pythonSmtp(name, node.server.smtp.production.implicit, 'implicit', root);
      assert.equal(smtp.ok, true, smtp.error);
      assert.equal(serialOf(smtp.serial!), serialOf(a!.pair.serial));
    }
  });

  test("node-2 renews: the CA's validation reaches node-1, which answers from the database; node-1 then serves the renewal without ordering", async () => {
    const [one, two] = nodes;
    const before = one!.server.running.certificates!.certificate.pair;
    const orders = ordering(one!.log.lines);
    two!.clock.set(renewalTime(before) + 60_000);
    assert.equal(await two!.server.running.certificates!.check(), 'obtained');
    const renewed = two!.server.running.certificates!.certificate.pair;
    assert.notEqual(renewed.serial, before.serial);
    assert.ok(
      two!.log.lines.some((l) => l.msg === 'ordering a certificate (ACME)' && l.renewing === true),
    );

    // node-1's clock says its certificate is not due: it takes up the stored one, nothing ordered.
    assert.equal(await one!.server.running.certificates!.check(), 'adopted');
    assert.equal(ordering(one!.log.lines), orders);
    const root = await pebble.root();
    assert.equal(
      serialOf((await servedCertificate(one!.httpsPort, name, root)).serialNumber),
      serialOf(renewed.serial),
    );
    // With the renewal served and its challenge done, the challenges table is empty again.
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      assert.equal((await client.query('SELECT token FROM acme_challenges')).rowCount, 0);
    } finally {
      await client.end();
    }
  });
});
