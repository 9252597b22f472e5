/**
 * HTTP behind a load balancer (issue 23, item 5): X-Forwarded-For names the client only when
 * the TCP peer is in `http.trusted_proxies`, read from the right (the right-most address that
 * is not itself a trusted proxy), and then every per-IP rule keys on that client: the keyless
 * window (send API and provider feedback), the viewer's window, console sign-in throttling, the
 * audit log and the request log. Connection caps count TCP peers. Real sockets from distinct
 * loopback addresses: 127.0.0.2 is the load balancer, 127.0.0.1 and 127.0.0.3 connect directly.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { allValues } from '../../src/store/queries.js';
import { operatorAccount, PASSWORD } from '../support/console.js';
import { capturedLogger, requestFrom } from '../support/fromAddress.js';
import { startTestPostern, type TestPostern, validMessage } from '../support/postern.js';
import { waitFor } from '../support/waiting.js';

const BALANCER = '127.0.0.2';
const DIRECT = '127.0.0.1';

describe('HTTP behind trusted proxies (http.trusted_proxies)', () => {
  let p: TestPostern;
  const log = capturedLogger();
  const keyless = (from: string, xff?: string) =>
    requestFrom(from, `${p.production}/v1/send`, {
      json: validMessage(),
      headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
    });

  before(async () => {
    p = await startTestPostern({
      console: true,
      logger: log.logger,
      config: {
        http: { trusted_proxies: [BALANCER, '10.0.0.0/8'] },
        rate_limits: {
          window_seconds: 600,
          send_per_key: 1000,
          batch_per_key: 1000,
          unauthenticated_per_ip: 2,
          viewer_per_ip: 2,
        },
        console: {
          sign_in_failures_per_ip: 2,
          sign_in_failures_per_account: 100,
          sign_in_window_seconds: 600,
        },
        // Its thread would log to stderr at this logger's level.
        webhooks: { enabled: false },
      },
    });
  });
  after(async () => p.close());

  test('from a trusted proxy the keyless window counts the X-Forwarded-For client: one client spends its own, another behind the same balancer is not held by it', async () => {
    assert.equal((await keyless(BALANCER, '198.51.100.1')).status, 401);
    assert.equal((await keyless(BALANCER, '198.51.100.1')).status, 401);
    const spent = await keyless(BALANCER, '198.51.100.1');
    assert.equal(spent.status, 429);
    assert.equal(spent.body.error.code, 'rate_limited');
    assert.equal(
      (await keyless(BALANCER, '198.51.100.2')).status,
      401,
      'a second client behind the balancer has a window of its own',
    );
    // Provider feedback endpoints count in the same window, by the same client (198.51.100.2 has spent one above).
    const feedback = (xff: string) =>
      requestFrom(BALANCER, `${p.production}/v1/feedback/pa.nothing-here`, {
        json: {},
        headers: { 'x-forwarded-for': xff },
      });
    assert.equal((await feedback('198.51.100.2')).status, 404);
    assert.equal((await feedback('198.51.100.2')).status, 429);
    assert.equal((await feedback('198.51.100.3')).status, 404);
  });

  test('spoofed entries left of the client are ignored: the client is the right-most address that is not itself a trusted proxy', async () => {
    for (let i = 0; i < 2; i++)
      assert.equal((await keyless(BALANCER, '198.51.100.10')).status, 401);
    // The client writes what it likes at the left; the balancer appends the address it saw.
    assert.equal((await keyless(BALANCER, '203.0.113.99, 198.51.100.10')).status, 429);
    assert.equal((await keyless(BALANCER, '203.0.113.98,198.51.100.10')).status, 429);
    // A trusted proxy in between (10.0.0.0/8) is skipped over, not taken for the client.
    assert.equal((await keyless(BALANCER, '198.51.100.10, 10.1.2.3')).status, 429);
    // The right-most untrusted address is the client, whatever stands left of it.
    assert.equal((await keyless(BALANCER, '198.51.100.10, 198.51.100.11')).status, 401);
  });

  test('from a peer that is not a trusted proxy the header is ignored: the window counts the TCP peer', async () => {
    assert.equal((await keyless(DIRECT, '198.51.100.20')).status, 401);
    assert.equal((await keyless(DIRECT, '198.51.100.21')).status, 401);
    assert.equal(
      (await keyless(DIRECT, '198.51.100.22')).status,
      429,
      'a new X-Forwarded-For does not buy a new window',
    );
  });

  test("the public viewer's per-IP window (rate_limits.viewer_per_ip) counts the forwarded client", async () => {
    const view = (xff: string) =>
      requestFrom(BALANCER, `${p.production}/view/m.nothing/token`, {
        headers: { 'x-forwarded-for': xff },
      });
    assert.equal((await view('198.51.100.30')).status, 404);
    assert.equal((await view('198.51.100.30')).status, 404);
    assert.equal((await view('198.51.100.30')).status, 429);
    assert.equal((await view('198.51.100.31')).status, 404);
  });

  test('console sign-in is throttled per forwarded client, and the audit log records the client behind the balancer as client_ip', async () => {
    const owner = await operatorAccount(p.ctx, 'owner@example.com', 'owner');
    const signIn = (xff: string, password: string) =>
      requestFrom(BALANCER, `${p.console}/console/api/v1/session`, {
        json: { email: owner.email, password },
        headers: { 'x-forwarded-for': xff },
      });
    assert.equal((await signIn('198.51.100.40', 'wrong password 1')).status, 401);
    assert.equal((await signIn('198.51.100.40', 'wrong password 2')).status, 401);
    const throttled = await signIn('198.51.100.40', PASSWORD);
    assert.equal(throttled.status, 429);
    assert.equal(throttled.body.error.code, 'sign_in_throttled');
    const signedIn = await signIn('198.51.100.41', PASSWORD);
    assert.equal(signedIn.status, 201, signedIn.text);
    const audited = await allValues<string>(
      p.ctx.store,
      "SELECT client_ip FROM audit_log WHERE action = 'session.sign_in' AND target = ?",
      owner.id,
    );
    assert.deepEqual(audited, ['198.51.100.41']);
  });

  test('the request log names the client (ip) and, when a trusted proxy forwarded the request, that proxy (proxy)', async () => {
    const cases: [
      from: string,
      xff: string | undefined,
      expected: { ip: string; proxy?: string },
    ][] = [
      [BALANCER, '198.51.100.50', { ip: '198.51.100.50', proxy: BALANCER }],
      [BALANCER, '203.0.113.1, 198.51.100.51, 10.9.9.9', { ip: '198.51.100.51', proxy: BALANCER }],
      [BALANCER, '2001:db8::7', { ip: '2001:db8::7', proxy: BALANCER }],
      // No header, or an entry that is no address: the last hop known is the balancer itself.
      [BALANCER, undefined, { ip: BALANCER }],
      [BALANCER, 'unknown', { ip: BALANCER }],
      [DIRECT, '198.51.100.52', { ip: DIRECT }],
    ];
    for (const [from, xff] of cases) {
      const marker = `/healthz?case=${encodeURIComponent(String(xff))}`;
      assert.equal(
        (
          await requestFrom(from, p.production + marker, {
            headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
          })
        ).status,
        200,
      );
    }
    const lines = await waitFor(() => {
      const found = log.lines.filter((l) => l.msg === 'request' && l.path === '/healthz');
      return found.length >= cases.length ? found : null;
    });
    assert.deepEqual(
      lines.map((l) => ({ ip: l.ip, ...(l.proxy === undefined ? {} : { proxy: l.proxy }) })),
      cases.map(([, , expected]) => expected),
    );
    const consoleLine = await (async () => {
      await requestFrom(BALANCER, `${p.console}/readyz`, {
        headers: { 'x-forwarded-for': '198.51.100.53' },
      });
      return waitFor(() =>
        log.lines.find((l) => l.msg === 'console request' && l.path === '/readyz'),
      );
    })();
    assert.deepEqual([consoleLine.ip, consoleLine.proxy], ['198.51.100.53', BALANCER]);
  });
});

describe('HTTP connection caps count TCP peers (http.max_connections_per_ip)', () => {
  let p: TestPostern;
  const sockets: net.Socket[] = [];
  before(async () => {
    p = await startTestPostern({
      config: { http: { trusted_proxies: [BALANCER], max_connections_per_ip: 1 } },
    });
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await p.close();
  });

  /** A keep-alive connection from `from` that asks GET /healthz; its status line. */
  async function openAndAsk(from: string): Promise<string> {
    const { port } = new URL(p.production);
    const socket = net.connect({ host: '127.0.0.1', port: Number(port), localAddress: from });
    sockets.push(socket);
    await new Promise<void>((resolve, reject) =>
      socket.once('connect', resolve).once('error', reject),
    );
    socket.write(
      `GET /healthz HTTP/1.1\r\nHost: postern\r\nX-Forwarded-For: 198.51.100.${sockets.length}\r\n\r\n`,
    );
    const head = await new Promise<string>((resolve, reject) => {
      socket.once('data', (d: Buffer) => resolve(d.toString('latin1')));
      socket.once('error', reject);
    });
    return head.split('\r\n')[0];
  }

  test('a trusted proxy is held to max_connections only; a direct client to max_connections_per_ip, whatever X-Forwarded-For it sends', async () => {
    assert.equal(await openAndAsk(BALANCER), 'HTTP/1.1 200 OK');
    assert.equal(
      await openAndAsk(BALANCER),
      'HTTP/1.1 200 OK',
      'the balancer carries many clients: its second connection is served',
    );
    assert.equal(await openAndAsk('127.0.0.3'), 'HTTP/1.1 200 OK');
    assert.equal(
      await openAndAsk('127.0.0.3'),
      'HTTP/1.1 503 Service Unavailable',
      'a direct client is one address',
    );
  });
});
