/**
 * The HTTP door's connections (issue 17): idle connections cannot take every file descriptor
 * the process may open (a real server under `ulimit -n 256`, flooded over real sockets), a
 * connection over a cap gets a clean `503 server_busy`, and the headers and request timeouts
 * fire when configured, not up to 30 s later.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import nodemailer from 'nodemailer';
import { getValue } from '../../src/store/queries.js';
import {
  createProjectWithKeys,
  type SpawnedPostern,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';
import { HANG_GUARD_MS, settle, waitFor } from '../support/waiting.js';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** One request on a fresh connection from `localAddress` (a loopback address of the test's choice). */
function request(
  base: string,
  method: string,
  pathname: string,
  opts: { localAddress: string; key?: string; json?: unknown },
): Promise<Answer> {
  const url = new URL(pathname, base);
  const payload = opts.json === undefined ? undefined : JSON.stringify(opts.json);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method,
        agent: false,
        localAddress: opts.localAddress,
        timeout: HANG_GUARD_MS,
        headers: {
          ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
          ...(payload ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: text ? JSON.parse(text) : undefined,
          }),
        );
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`no answer within ${HANG_GUARD_MS} ms to ${method} ${pathname}`)),
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** `count` connections from `localAddress` that send nothing; each notes when the server closed it. */
async function idleConnections(
  port: number,
  localAddress: string,
  count: number,
): Promise<{ sockets: net.Socket[]; closedByServer: () => number }> {
  let closed = 0;
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Socket>((resolve) => {
          const socket = net.connect({ host: '127.0.0.1', port, localAddress });
          socket.on('error', () => undefined);
          socket.once('close', () => closed++);
          socket.once('connect', () => resolve(socket));
          socket.once('close', () => resolve(socket));
        }),
    ),
  );
  return { sockets, closedByServer: () => closed };
}

function assertBusy(res: Answer): void {
  assert.equal(res.status, 503);
  assert.deepEqual(res.body, {
    error: { type: 'api_error', code: 'server_busy', message: res.body.error.message },
  });
  assert.equal(res.headers['retry-after'], '1');
  assert.equal(res.headers.connection, 'close');
}

async function smtpSend(port: number, key: string, subject: string): Promise<string> {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    requireTLS: true,
    auth: { user: 'any', pass: key },
    tls: { rejectUnauthorized: false },
    connectionTimeout: 10_000,
  });
  try {
    const info = await transport.sendMail({
      from: 'sender@example.com',
      to: 'rcpt@example.org',
      subject,
      text: 'over SMTP',
    });
    return info.response;
  } finally {
    transport.close();
  }
}

/**
 * A real server under `ulimit -n 256` with max_connections 64 and max_connections_per_ip 16, for
 * the tests of one describe block (a fresh one per block: no block waits for the server to count
 * out another block's connections). Idle connections stay until the test closes them: the caps,
 * not the timeouts, are under test.
 */
function cappedServer(): {
  server: () => SpawnedPostern;
  liveKey: () => string;
  httpPort: () => number;
  smtpPort: () => number;
  open: net.Socket[];
} {
  const processes = new ProcessScope();
  let server: SpawnedPostern;
  let liveKey: string;
  const open: net.Socket[] = [];
  before(async () => {
    const stateDir = processes.stateDir('postern-connections-');
    liveKey = (await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'connections')))
      .liveKey;
    const configFile = path.join(stateDir, 'config.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        delivery: { enabled: false },
        http: {
          max_connections: 64,
          max_connections_per_ip: 16,
          headers_timeout_ms: 120_000,
          keep_alive_timeout_ms: 120_000,
        },
      }),
    );
    server = await processes.spawn(stateDir, { POSTERN_CONFIG: configFile }, [], {
      openFileLimit: 256,
    });
  });
  after(async () => {
    for (const s of open) s.destroy();
    await processes.cleanup();
  });
  return {
    server: () => server,
    liveKey: () => liveKey,
    httpPort: () => Number(new URL(server.production).port),
    smtpPort: () => server.listeners.find((l) => l.name === 'smtp-587')!.port,
    open,
  };
}

describe('connection caps under ulimit -n 256 (max_connections 64, max_connections_per_ip 16)', () => {
  const capped = cappedServer();
  const open = capped.open;
  let server: SpawnedPostern;
  let liveKey: string;
  let httpPort: number;
  let smtpPort: number;
  before(() => {
    [server, liveKey, httpPort, smtpPort] = [
      capped.server(),
      capped.liveKey(),
      capped.httpPort(),
      capped.smtpPort(),
    ];
  });

  test('300 idle connections from one address: 16 are kept, the rest closed; another address still sends (202) and SMTP still accepts', async () => {
    const flood = await idleConnections(httpPort, '127.0.0.1', 300);
    open.push(...flood.sockets);
    // Refused connections that never send a request are closed within 2 s (at once past 64 pending).
    await waitFor(
      () => flood.closedByServer() >= 300 - 16,
      HANG_GUARD_MS,
      'the refused connections to be closed',
    );
    await settle(500);
    assert.equal(flood.closedByServer(), 300 - 16);

    const sent = await request(server.production, 'POST', '/v1/send', {
      localAddress: '127.0.0.3',
      key: liveKey,
      json: validMessage(),
    });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    assert.match(
      await smtpSend(smtpPort, liveKey, 'during the flood'),
      /^250 2\.0\.0 OK queued as m\./,
    );
  });

  test('a 17th connection from one address that sends a request gets 503 server_busy with Retry-After: 1, and is closed', async () => {
    const kept = await idleConnections(httpPort, '127.0.0.4', 16);
    open.push(...kept.sockets);
    assertBusy(await request(server.production, 'GET', '/healthz', { localAddress: '127.0.0.4' }));
    assert.equal(kept.closedByServer(), 0);
  });
});

describe('connection caps under ulimit -n 256, every connection taken', () => {
  const capped = cappedServer();
  let server: SpawnedPostern;
  let liveKey: string;
  let httpPort: number;
  let smtpPort: number;
  before(() => {
    [server, liveKey, httpPort, smtpPort] = [
      capped.server(),
      capped.liveKey(),
      capped.httpPort(),
      capped.smtpPort(),
    ];
  });

  test('with every connection taken (64, from many addresses) a new client gets 503 server_busy, SMTP still accepts, and once they close sends are served again', async () => {
    const floods: Awaited<ReturnType<typeof idleConnections>>[] = [];
    for (let i = 1; i <= 20; i++) floods.push(await idleConnections(httpPort, `127.0.1.${i}`, 10));
    const closed = () => floods.reduce((n, f) => n + f.closedByServer(), 0);
    await waitFor(
      () => closed() >= 200 - 64,
      HANG_GUARD_MS,
      'the connections over the cap to be closed',
    );
    await settle(500);
    assert.equal(closed(), 200 - 64);

    assertBusy(
      await request(server.production, 'POST', '/v1/send', {
        localAddress: '127.0.0.5',
        key: liveKey,
        json: validMessage(),
      }),
    );
    assert.match(
      await smtpSend(smtpPort, liveKey, 'while HTTP is full'),
      /^250 2\.0\.0 OK queued as m\./,
    );

    for (const f of floods) for (const s of f.sockets) s.destroy();
    // Served again once the server has counted them out (a 503 meanwhile stores nothing).
    const sent = await waitFor(
      async () => {
        const res = await request(server.production, 'POST', '/v1/send', {
          localAddress: '127.0.0.5',
          key: liveKey,
          json: validMessage(),
        });
        return res.status === 503 ? null : res;
      },
      HANG_GUARD_MS,
      'a send to be served once the connections closed',
    );
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
  });
});

/**
 * Opens a connection to `base`, writes `data`, and resolves with what the server answered once it
 * closed the connection. A hang guard of 2 minutes: generous for the timeouts configured here
 * (seconds), short of Node's defaults (60 s for headers, 300 s for a request, checked every 30 s),
 * which a timeout not applied would leave in force.
 */
function answeredAndClosed(
  base: string,
  data: string,
): { done: Promise<string>; closed: () => boolean; socket: net.Socket } {
  const url = new URL(base);
  let isClosed = false;
  const socket = net.connect(Number(url.port), url.hostname, () => socket.write(data));
  const done = new Promise<string>((resolve) => {
    let answer = '';
    socket.on('data', (d) => (answer += d));
    socket.on('error', () => undefined);
    socket.once('close', () => {
      isClosed = true;
      resolve(answer);
    });
  });
  setTimeout(() => socket.destroy(), 120_000).unref();
  return { done, closed: () => isClosed, socket };
}

const sendHeaders = (key: string, bodyLength: number) =>
  `POST /v1/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${bodyLength}\r\n\r\n`;

describe('the headers timeout fires as configured (headers_timeout_ms 1000, request_timeout_ms 60000)', () => {
  let p: TestPostern;
  let key: string;
  before(async () => {
    p = await startTestPostern({
      config: { http: { headers_timeout_ms: 1000, request_timeout_ms: 60_000 } },
    });
    key = (await createProjectWithKeys(p.ctx, 'timeouts')).testKey;
  });
  after(async () => p.close());

  /**
   * A connection whose headers are in and whose body never comes, opened first: only the request
   * timeout (a minute) applies to it. Another connection closed while it is still open was
   * closed by the headers timeout, which it had passed, and which is shorter than Node's default
   * (60 s) since the request timeout is not longer than that.
   */
  const witness = () => answeredAndClosed(p.sandbox, `${sendHeaders(key, 100)}{"from":`);

  test('a connection that sends nothing is answered 408 and closed, before one that has sent its headers', async () => {
    const older = witness();
    const { done } = answeredAndClosed(p.sandbox, '');
    assert.match(await done, /^HTTP\/1\.1 408 /);
    assert.equal(older.closed(), false, 'the connection past its headers is still open');
    older.socket.destroy();
  });

  test('headers sent slowly are answered 408, before a connection that has sent its headers', async () => {
    const older = witness();
    const { done } = answeredAndClosed(
      p.sandbox,
      `POST /v1/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n`,
    );
    assert.match(await done, /^HTTP\/1\.1 408 /);
    assert.equal(older.closed(), false, 'the connection past its headers is still open');
    older.socket.destroy();
  });
});

describe('the request timeout fires as configured (request_timeout_ms 2000)', () => {
  let p: TestPostern;
  let key: string;
  before(async () => {
    p = await startTestPostern({
      config: { http: { headers_timeout_ms: 1000, request_timeout_ms: 2000 } },
    });
    key = (await createProjectWithKeys(p.ctx, 'timeouts')).testKey;
  });
  after(async () => p.close());

  test("a body that stops half-way is answered 408 (well before the hang guard: the configured timeout, not Node's 300 s), and nothing is stored", async () => {
    const before = await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages');
    const body = JSON.stringify(validMessage());
    const { done } = answeredAndClosed(
      p.sandbox,
      `${sendHeaders(key, body.length)}${body.slice(0, 10)}`,
    );
    assert.match(await done, /^HTTP\/1\.1 408 /);
    assert.equal(await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages'), before);
  });
});
