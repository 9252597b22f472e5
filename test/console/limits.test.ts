/**
 * The console listener is an HTTP listener with caps of its own (issue 32): its connections count
 * in `console.max_connections` / `console.max_connections_per_ip`, never in the send API's
 * `http.max_connections`, so neither door can take the other's connections; its live-update
 * streams are capped per operator and per node; its request bodies share the node's
 * `http.max_inflight_body_bytes` budget (issue 17). A real server, its console over HTTPS, real
 * sockets.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generate } from 'selfsigned';
import { createOperatorToken } from '../../src/operator/operators.js';
import { API, assertDocumented, operatorAccount, PASSWORD } from '../support/console.js';
import {
  createProjectWithKeys,
  startTestPostern,
  type TestPostern,
  tempStateDir,
} from '../support/postern.js';
import { RawEventStream } from '../support/rawEventStream.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';

const MAX_CONNECTIONS = 4;
/** The console's own cap, and its streams': per node, and per operator. */
const CONSOLE_CONNECTIONS = 6;
const MAX_STREAMS = 4;
const STREAMS_PER_OPERATOR = 2;
const BODY_BUDGET = 4096;
const BODY_WAIT_MS = 300;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request on a connection of its own (no pool holding connections open): the console over HTTPS, or the send API. */
function request(
  url: string,
  opts: { ca?: string; key?: string; method?: string; json?: unknown } = {},
): Promise<Answer> {
  const body = opts.json === undefined ? undefined : JSON.stringify(opts.json);
  const method = opts.method ?? (body === undefined ? 'GET' : 'POST');
  const headers: Record<string, string | number> =
    body === undefined
      ? {}
      : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  const pathname = new URL(url).pathname;
  return new Promise((resolve, reject) => {
    const req = (opts.ca ? https : http).request(
      url,
      { method, ca: opts.ca, agent: false, timeout: HANG_GUARD_MS, headers },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`no answer within ${HANG_GUARD_MS} ms to ${method} ${pathname}`)),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A 503 server_busy with Retry-After; a console answer also as its document describes it. */
function assertBusy(res: Answer, consoleOperation?: { method: string; pathname: string }): void {
  assert.equal(res.status, 503, res.text);
  const body = JSON.parse(res.text) as { error: { code: string } };
  assert.equal(body.error.code, 'server_busy');
  assert.ok(Number(res.headers['retry-after']) >= 1, 'Retry-After');
  if (consoleOperation) {
    const { method, pathname } = consoleOperation;
    assertDocumented(method, `${API}${pathname}`, {
      status: res.status,
      headers: new Headers({ 'content-type': String(res.headers['content-type']) }),
      body,
      text: res.text,
    });
  }
}

/** `count` plain TCP connections to `port` that send nothing (yet). */
async function connections(port: number, count: number): Promise<net.Socket[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Socket>((resolve, reject) => {
          const socket = net.connect({ host: '127.0.0.1', port }, () => resolve(socket));
          socket.once('error', reject);
        }),
    ),
  );
}

/**
 * `count` idle connections to a listener, once the server has counted them all (the cap is
 * `count`). It counts a connection when the listener accepts it, which can come after the
 * client's connect, but a listener accepts in the order of connecting: `probe`, a request on a
 * connection opened after them to the same listener, is counted after them, over the cap.
 */
async function idleConnections(
  port: number,
  count: number,
  probe: () => Promise<Answer>,
): Promise<net.Socket[]> {
  const sockets = await connections(port, count);
  assert.equal(
    (await probe()).status,
    503,
    'a request after them, on the same listener, is over the cap',
  );
  return sockets;
}

async function closeAll(sockets: net.Socket[]): Promise<void> {
  await Promise.all(
    sockets.map(
      (s) =>
        new Promise<void>((resolve) => {
          if (s.destroyed) resolve();
          else {
            s.once('close', () => resolve());
            s.destroy();
          }
        }),
    ),
  );
}

describe('console connections and bodies', () => {
  let p: TestPostern;
  let ca: string;
  let key: string;
  before(async () => {
    const dir = tempStateDir('postern-console-limits-');
    const pems = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
      keySize: 2048,
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
    });
    writeFileSync(path.join(dir, 'console.crt'), pems.cert);
    writeFileSync(path.join(dir, 'console.key'), pems.private);
    ca = pems.cert;
    p = await startTestPostern({
      console: { cert: path.join(dir, 'console.crt'), key: path.join(dir, 'console.key') },
      config: {
        http: {
          max_connections: MAX_CONNECTIONS,
          max_connections_per_ip: MAX_CONNECTIONS,
          max_inflight_body_bytes: BODY_BUDGET,
          body_wait_ms: BODY_WAIT_MS,
        },
        console: {
          max_connections: CONSOLE_CONNECTIONS,
          max_connections_per_ip: CONSOLE_CONNECTIONS,
          max_streams: MAX_STREAMS,
          max_streams_per_operator: STREAMS_PER_OPERATOR,
        },
      },
    });
    key = (await createProjectWithKeys(p.ctx, 'limits')).liveKey;
    await operatorAccount(p.ctx, 'limits@example.com', 'owner');
  });
  after(async () => p?.close());

  const document = () => request(`${p.console}${API}/openapi.json`, { ca });
  const send = () =>
    request(`${p.production}/v1/send`, {
      key,
      json: { from: 'a@example.com', to: 'b@example.org', subject: 's', text: 't' },
    });

  test('send API connections fill http.max_connections: a send is answered 503 server_busy, the console still serves', async () => {
    const idle = await idleConnections(Number(new URL(p.production).port), MAX_CONNECTIONS, send);
    try {
      assertBusy(await send());
      assert.equal((await document()).status, 200);
    } finally {
      await closeAll(idle);
    }
    await waitFor(
      async () => (await send()).status === 202,
      HANG_GUARD_MS,
      'the send API to accept again',
    );
  });

  test('console connections fill console.max_connections: a console request is answered 503 server_busy, a send is still accepted', async () => {
    const idle = await idleConnections(
      Number(new URL(p.console).port),
      CONSOLE_CONNECTIONS,
      document,
    );
    try {
      assertBusy(await document(), { method: 'GET', pathname: '/openapi.json' });
      assert.equal((await send()).status, 202);
    } finally {
      await closeAll(idle);
    }
    await waitFor(
      async () => (await document()).status === 200,
      HANG_GUARD_MS,
      'the console to serve again',
    );
  });

  test('live streams stop at console.max_streams_per_operator (429) and console.max_streams (503); meanwhile the send API accepts every send', async () => {
    const first = await operatorAccount(p.ctx, 'streams-1@example.com', 'owner');
    const second = await operatorAccount(p.ctx, 'streams-2@example.com', 'member');
    const tokens = [
      (await createOperatorToken(p.ctx, first.id, 'streams')).token,
      (await createOperatorToken(p.ctx, second.id, 'streams')).token,
    ];
    const open: RawEventStream[] = [];
    const stream = async (token: string) => {
      const s = await RawEventStream.open(p.console, { token, ca, paused: true });
      if (s.status === 200) open.push(s);
      else s.close();
      return s;
    };
    try {
      // One operator: their cap, then 429 rate_limited (another operator may still open theirs).
      for (let i = 0; i < STREAMS_PER_OPERATOR; i++)
        assert.equal((await stream(tokens[0])).status, 200);
      const perOperator = await stream(tokens[0]);
      assert.equal(perOperator.status, 429);
      assert.equal(perOperator.body.error.code, 'rate_limited');
      assert.ok(Number(perOperator.headers['retry-after']) >= 1);
      assertDocumented('GET', `${API}/events/stream`, {
        status: 429,
        headers: new Headers({ 'content-type': perOperator.headers['content-type'] }),
        body: perOperator.body,
        text: JSON.stringify(perOperator.body),
      });
      // The node: its cap, then 503 server_busy.
      for (let i = 0; i < MAX_STREAMS - STREAMS_PER_OPERATOR; i++)
        assert.equal((await stream(tokens[1])).status, 200);
      const perNode = await stream(tokens[1]);
      assert.equal(perNode.status, 503);
      assert.equal(perNode.body.error.code, 'server_busy');
      // The streams take none of the send API's connections.
      const answers = [];
      for (let i = 0; i < 20; i++) answers.push((await send()).status);
      assert.deepEqual(answers, Array(20).fill(202));
      // A stream that closes frees its place.
      open.shift()!.close();
      await waitFor(
        async () => (await stream(tokens[0])).status === 200,
        HANG_GUARD_MS,
        'a freed place for the first operator',
      );
    } finally {
      for (const s of open) s.close();
    }
  });

  test('a console body waits for the body budget a send holds, and past body_wait_ms is refused 503 server_busy; then it is read', async () => {
    const signIn = { email: 'limits@example.com', password: PASSWORD };
    // A send that declared almost the whole budget and sends its body slowly holds it. Until it
    // does, a sign-in gets the budget (201: the send's headers not read yet), and a send that had
    // to wait past body_wait_ms behind a sign-in is refused: then it is sent again. Only a send
    // holding the budget can make a sign-in wait, and be refused.
    let refused: Answer | null = null;
    const deadline = Date.now() + HANG_GUARD_MS;
    while (!refused && Date.now() < deadline) {
      const [holder] = await connections(Number(new URL(p.production).port), 1);
      let holderAnswer = '';
      holder.on('data', (d: Buffer) => (holderAnswer += d.toString()));
      holder.write(
        `POST /v1/send HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${BODY_BUDGET - 16}\r\n\r\n{"from":`,
      );
      try {
        while (!refused && holderAnswer === '') {
          const r = await request(`${p.console}${API}/session`, { ca, json: signIn });
          if (r.status === 201) continue;
          assert.equal(holderAnswer, '', 'the send holding the budget is still being read');
          refused = r;
        }
      } finally {
        await closeAll([holder]);
      }
    }
    assert.ok(refused, 'a sign-in was refused while the send held the budget');
    assertBusy(refused, { method: 'POST', pathname: '/session' });
    const res = await waitFor(
      async () => {
        const r = await request(`${p.console}${API}/session`, { ca, json: signIn });
        return r.status === 201 ? r : null;
      },
      HANG_GUARD_MS,
      'the sign-in to be read',
    );
    assert.equal(res.status, 201);
  });
});
