/**
 * SMTP behind a load balancer (issue 23, item 5): a listener with `proxy_protocol` takes
 * connections only from its `trusted_proxies`, each starting with a PROXY protocol v1 header
 * (HAProxy `send-proxy`), and every per-IP rule keys on the client address the header names.
 * Real sockets from distinct loopback addresses: 127.0.0.2 is the load balancer, 127.0.0.1
 * connects directly.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { getValue } from '../../src/store/queries.js';
import { capturedLogger } from '../support/fromAddress.js';
import { createProjectWithKeys, startTestPostern, type TestPostern } from '../support/postern.js';
import { plain, RawSmtp, rawMessage, rawSend } from '../support/rawSmtp.js';
import { waitFor } from '../support/waiting.js';

const BALANCER = '127.0.0.2';
const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;
const BAD_KEY = `ps_live_${'B'.repeat(40)}`;

/** The line HAProxy's `send-proxy` writes first on each connection it opens for `client`. */
const proxyLine = (client: string, clientPort = 40000) =>
  `PROXY TCP4 ${client} 127.0.0.1 ${clientPort} 25\r\n`;

/** Everything a raw connection hears until the server closes it. */
async function heardUntilClosed(socket: net.Socket): Promise<string> {
  let heard = '';
  socket.on('data', (d: Buffer) => (heard += d.toString('latin1')));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return heard;
}

describe('SMTP listeners behind a load balancer (listeners[].proxy_protocol, trusted_proxies)', () => {
  let p: TestPostern;
  const log = capturedLogger('debug');
  const clients: RawSmtp[] = [];
  const port = (name: string) => p.running.listeners.find((l) => l.name === name)!.port;
  /** A session through the balancer for `client`, on the STARTTLS or the implicit-TLS listener. */
  const viaBalancer = async (client: string, implicit = false) => {
    const opened = await RawSmtp.connect(port(implicit ? 'smtp-lb-implicit' : 'smtp-lb'), {
      localAddress: BALANCER,
      proxyHeader: proxyLine(client),
      implicit,
    });
    clients.push(opened.client);
    return opened;
  };

  before(async () => {
    // A CIDR (127.0.0.2 and .3), as a pair of balancers is often listed; 127.0.0.1 is outside it.
    const behindBalancer = {
      protocol: 'smtp',
      environment: 'production',
      host: '127.0.0.1',
      port: 0,
      proxy_protocol: true,
      trusted_proxies: ['127.0.0.2/31'],
    };
    p = await startTestPostern({
      logger: log.logger,
      config: {
        listeners: [
          {
            name: 'http-production',
            protocol: 'http',
            environment: 'production',
            host: '127.0.0.1',
            port: 0,
          },
          {
            name: 'http-sandbox',
            protocol: 'http',
            environment: 'sandbox',
            host: '127.0.0.1',
            port: 0,
          },
          { name: 'smtp-lb', tls: 'starttls', ...behindBalancer },
          { name: 'smtp-lb-implicit', tls: 'implicit', ...behindBalancer },
          {
            name: 'smtp-direct',
            protocol: 'smtp',
            environment: 'production',
            host: '127.0.0.1',
            port: 0,
            tls: 'starttls',
          },
        ],
        smtp: { max_clients_per_ip: 1, auth_failures_before_delay: 10 },
        rate_limits: {
          window_seconds: 600,
          send_per_key: 1000,
          batch_per_key: 1000,
          unauthenticated_per_ip: 2,
        },
        // Its thread would log to stderr at this logger's level.
        webhooks: { enabled: false },
      },
    });
  });
  after(async () => {
    for (const c of clients) c.destroy();
    await p.close();
  });

  test("connections per IP (smtp.max_clients_per_ip) count the client each PROXY header names, not the balancer's address; a session through it sends over STARTTLS", async () => {
    const { liveKey, project } = await createProjectWithKeys(p.ctx, 'behind the balancer');
    const first = await viaBalancer('203.0.113.7');
    assert.match(first.greeting, /^220 /);
    const second = await viaBalancer('203.0.113.8');
    assert.match(second.greeting, /^220 /, 'a second client through the same balancer is served');
    const again = await viaBalancer('203.0.113.7');
    assert.equal(again.greeting, '421 Too many connections from 203.0.113.7');
    await again.client.closed;

    const client = second.client;
    assert.match(await client.command('EHLO client.test'), /^250/);
    await client.startTls();
    assert.match(await client.command('EHLO client.test'), /^250/);
    assert.match(await client.command(`AUTH PLAIN ${plain(liveKey)}`), /^235 /);
    const [, id] = QUEUED.exec(
      await rawSend(client, 'sender@example.com', ['rcpt@example.org'], rawMessage()),
    )!;
    assert.equal(
      await getValue<string>(p.ctx.store, 'SELECT project_id FROM messages WHERE id = ?', id),
      project.id,
    );
    await client.quit();
    await first.client.quit();
  });

  test("the keyless per-IP window counts the forwarded client: AUTH with bad keys spends its own window, not the balancer's", async () => {
    const spender = await viaBalancer('203.0.113.20');
    const c = spender.client;
    assert.match(await c.command('EHLO client.test'), /^250/);
    await c.startTls();
    assert.match(await c.command('EHLO client.test'), /^250/);
    assert.match(await c.command(`AUTH PLAIN ${plain(BAD_KEY)}`), /^535 /);
    assert.match(await c.command(`AUTH PLAIN ${plain(BAD_KEY)}`), /^535 /);
    assert.match(await c.command(`AUTH PLAIN ${plain(BAD_KEY)}`), /^451 4\.3\.0 rate_limited: /);
    await c.quit();

    // Over implicit TLS, another client behind the same balancer still has its whole window.
    const other = await viaBalancer('203.0.113.21', true);
    assert.match(other.greeting, /^220 /);
    assert.match(await other.client.command('EHLO client.test'), /^250/);
    assert.match(await other.client.command(`AUTH PLAIN ${plain(BAD_KEY)}`), /^535 /);
    await other.client.quit();
  });

  test('over implicit TLS the header comes before the handshake, and the client it names is counted per IP', async () => {
    const first = await viaBalancer('203.0.113.30', true);
    assert.match(first.greeting, /^220 /);
    const again = await viaBalancer('203.0.113.30', true);
    assert.equal(again.greeting, '421 Too many connections from 203.0.113.30');
    await first.client.quit();
  });

  test('a connection from an address not in trusted_proxies is refused with 421 at once, with or without a PROXY header', async () => {
    for (const proxyHeader of [proxyLine('203.0.113.40'), undefined]) {
      const { client, greeting } = await RawSmtp.connect(port('smtp-lb'), { proxyHeader });
      clients.push(client);
      assert.equal(
        greeting,
        '421 This listener takes connections only from its load balancer (PROXY protocol)',
      );
      await client.closed;
    }
    const refusals = log.lines.filter(
      (l) => l.msg === 'SMTP connection refused: not from a trusted proxy',
    );
    assert.deepEqual(
      refusals.map((l) => [l.listener, l.peer]),
      [
        ['smtp-lb', '127.0.0.1'],
        ['smtp-lb', '127.0.0.1'],
      ],
    );
  });

  test('a connection from the balancer without a valid PROXY header gets no SMTP greeting: "* BAD Invalid PROXY header", closed, and a warning in the log', async () => {
    for (const first of [
      'EHLO client.test\r\n',
      'PROXY TCP4 mail.example.org 127.0.0.1 40000 25\r\n',
    ]) {
      const socket = net.connect({
        host: '127.0.0.1',
        port: port('smtp-lb'),
        localAddress: BALANCER,
      });
      const heard = heardUntilClosed(socket);
      socket.write(first);
      assert.equal(await heard, '* BAD Invalid PROXY header\r\n');
    }
    const warnings = await waitFor(() => {
      const found = log.lines.filter(
        (l) =>
          l.msg ===
          'SMTP connection refused: no valid PROXY protocol header from the load balancer',
      );
      return found.length === 2 ? found : null;
    });
    assert.deepEqual(
      warnings.map((l) => [l.level, l.listener, l.proxy]),
      [
        [40, 'smtp-lb', BALANCER],
        [40, 'smtp-lb', BALANCER],
      ],
    );
  });

  test('a listener without proxy_protocol never honours a PROXY line: it is an unknown command, and the client stays the TCP peer', async () => {
    const first = await RawSmtp.connect(port('smtp-direct'), {
      proxyHeader: proxyLine('203.0.113.50'),
    });
    clients.push(first.client);
    assert.match(first.greeting, /^220 /);
    assert.match(await first.client.next(), /^500 /);
    const second = await RawSmtp.connect(port('smtp-direct'), {
      proxyHeader: proxyLine('203.0.113.51'),
    });
    clients.push(second.client);
    assert.equal(second.greeting, '421 Too many connections from 127.0.0.1');
    await first.client.quit();
  });
});
