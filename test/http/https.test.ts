/**
 * TLS on the HTTP send listeners (issue 37): a listener with cert/key serves the send API over
 * HTTPS only (HTTP/1.1, TLS 1.2 or later) to clients that verify it; http.redirect_plain's plain
 * listener redirects GET and HEAD to it and processes nothing else: a request with a key (or any
 * other method) is answered 403 https_required before its body is read, and nothing is stored;
 * reloading swaps a new pair in for new connections, and a pair that does not load keeps the old.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, type TLSSocket } from 'node:tls';
import { generate } from 'selfsigned';
import { messageCountsByStatus } from '../../src/store/activity.js';
import { capturedLogger } from '../support/fromAddress.js';
import { tempDirs } from '../support/hooks.js';
import { freePort } from '../support/pebble.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { nodeFetch, servedCertificate } from '../support/tlsClients.js';

const NAME = 'api.postern.test';

async function pair(commonName: string): Promise<{ cert: string; key: string }> {
  const pems = await generate([{ name: 'commonName', value: commonName }], {
    keySize: 2048,
    algorithm: 'sha256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: NAME }] }],
  });
  return { cert: pems.cert, key: pems.private };
}

/** One raw HTTP/1.1 exchange on the plain listener: what comes back before the server closes (or 5 s of quiet). */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.setTimeout(5000, () => socket.end());
    socket.on('data', (d) => (answer += d.toString('latin1')));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

function postOverHttps(
  port: number,
  ca: string,
  key: string,
  body: unknown,
): Promise<{ status: number; body: string; protocol: string | null; tls: string | null }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        servername: NAME,
        ca,
        agent: new Agent({ ALPNProtocols: ['http/1.1'] }),
        method: 'POST',
        path: '/v1/send',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${key}`,
          'content-length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        const socket = res.socket as TLSSocket;
        const negotiated = { protocol: socket.alpnProtocol || null, tls: socket.getProtocol() };
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, ...negotiated }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('an HTTPS send listener with cert/key, and http.redirect_plain', () => {
  const stateDir = tempDirs('postern-https-')();
  const certPath = path.join(stateDir, 'api.crt');
  const keyPath = path.join(stateDir, 'api.key');
  const log = capturedLogger('info');
  let first: { cert: string; key: string };
  let server: TestPostern;
  let keys: ProjectWithKeys;
  let httpsPort: number;
  let plainPort: number;

  before(async () => {
    first = await pair('first');
    writeFileSync(certPath, first.cert);
    writeFileSync(keyPath, first.key);
    plainPort = await freePort();
    server = await startTestPostern({
      stateDir: path.join(stateDir, 'state'),
      logger: log.logger,
      config: {
        listeners: [
          {
            name: 'http-production',
            protocol: 'http',
            environment: 'production',
            host: '127.0.0.1',
            port: 0,
            cert: certPath,
            key: keyPath,
          },
          {
            name: 'http-sandbox',
            protocol: 'http',
            environment: 'sandbox',
            host: '127.0.0.1',
            port: 0,
          },
        ],
        http: { redirect_plain: { host: '127.0.0.1', port: plainPort } },
      },
    });
    httpsPort = Number(new URL(server.production).port);
    keys = await createProjectWithKeys(server.ctx);
  });
  after(async () => {
    await server?.close();
  });

  test('serves the send API over HTTPS (HTTP/1.1, TLS 1.2 or later) to a client that verifies the certificate', async () => {
    assert.match(server.production, /^https:\/\/127\.0\.0\.1:\d+$/);
    const sent = await postOverHttps(httpsPort, first.cert, keys.liveKey, validMessage());
    assert.equal(sent.status, 202, sent.body);
    assert.equal(sent.protocol, 'http/1.1');
    assert.match(sent.tls ?? '', /^TLSv1\.[23]$/);
    const fetched = await nodeFetch(NAME, `https://${NAME}:${httpsPort}/healthz`, first.cert);
    assert.equal(fetched.ok, true, fetched.error);
    assert.equal(fetched.status, 200);
    // A client that does not trust it is refused by its own verification: the check above can fail.
    const other = await pair('other');
    const untrusted = await nodeFetch(NAME, `https://${NAME}:${httpsPort}/healthz`, other.cert);
    assert.equal(untrusted.ok, false);
  });

  test('a client that offers only TLS 1.1, or only h2, gets no connection', async () => {
    const attempt = (opts: {
      maxVersion?: 'TLSv1.1';
      minVersion?: 'TLSv1';
      ALPNProtocols?: string[];
      ciphers?: string;
    }) =>
      new Promise<string>((resolve) => {
        const socket = connect(
          { host: '127.0.0.1', port: httpsPort, servername: NAME, ca: first.cert, ...opts },
          () => {
            socket.end();
            resolve(`connected ${socket.getProtocol()} ${socket.alpnProtocol}`);
          },
        );
        socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      });
    // SECLEVEL=0: the client itself would allow TLS 1.1; the server refuses it.
    assert.match(
      await attempt({ minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }),
      /PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL|VERSION/i,
    );
    assert.match(
      await attempt({ ALPNProtocols: ['h2'] }),
      /NO_APPLICATION_PROTOCOL|ECONNRESET|alert/i,
    );
    assert.equal(await attempt({ ALPNProtocols: ['http/1.1'] }), 'connected TLSv1.3 http/1.1');
  });

  test('the plain listener redirects GET and HEAD (308) to the same path on the HTTPS listener, under the name the client asked for', async () => {
    for (const method of ['GET', 'HEAD']) {
      const answer = await rawExchange(
        plainPort,
        `${method} /openapi.json?x=1 HTTP/1.1\r\nHost: ${NAME}:${plainPort}\r\nConnection: close\r\n\r\n`,
      );
      assert.match(answer, /^HTTP\/1\.1 308 /, method);
      assert.match(
        answer,
        new RegExp(
          `\r\nLocation: https://${NAME.replaceAll('.', '\\.')}:${httpsPort}/openapi\\.json\\?x=1\r\n`,
          'i',
        ),
        answer,
      );
    }
  });

  test('a send to the plain listener is refused before its body is read (403 https_required, the key called exposed), and nothing is stored', async () => {
    const before = await messageCountsByStatus(server.ctx.store);
    // Headers announcing a 1 MB body, and no body: the answer comes without the server waiting for it.
    const answer = await rawExchange(
      plainPort,
      `POST /v1/send HTTP/1.1\r\nHost: ${NAME}\r\nAuthorization: Bearer ${keys.liveKey}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n`,
    );
    assert.match(answer, /^HTTP\/1\.1 403 /);
    assert.match(answer, /\r\nConnection: close\r\n/i);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as {
      error: { code: string; type: string; message: string };
    };
    assert.equal(body.error.code, 'https_required');
    assert.equal(body.error.type, 'permission_error');
    assert.match(
      body.error.message,
      new RegExp(`Send it to https://${NAME.replaceAll('.', '\\.')}:${httpsPort}/v1/send\\.`),
    );
    assert.match(body.error.message, /consider it exposed and rotate it/);
    // A GET with a key is not redirected either (the client would send the key again).
    const withKey = await rawExchange(
      plainPort,
      `GET /openapi.json HTTP/1.1\r\nHost: ${NAME}\r\nAuthorization: Bearer ${keys.liveKey}\r\nConnection: close\r\n\r\n`,
    );
    assert.match(withKey, /^HTTP\/1\.1 403 /);
    // No Host (HTTP/1.0): nowhere to redirect to.
    assert.match(await rawExchange(plainPort, 'GET / HTTP/1.0\r\n\r\n'), /^HTTP\/1\.1 403 /);

    assert.deepEqual(await messageCountsByStatus(server.ctx.store), before);
    const warned = log.lines.filter(
      (l) => l.msg === 'a request with credentials came over plain HTTP; it was refused unread',
    );
    assert.equal(warned.length, 2);
    assert.ok(!JSON.stringify(log.lines).includes(keys.liveKey), 'the key is never logged');
  });

  test('a reload serves a new pair to new connections; a pair that does not load is refused and the old one kept', async () => {
    const second = await pair('second');
    writeFileSync(certPath, second.cert);
    writeFileSync(keyPath, second.key);
    server.running.reloadTls();
    assert.equal((await servedCertificate(httpsPort, NAME, second.cert)).subject.CN, 'second');
    // A key that is not the certificate's: refused whole.
    writeFileSync(keyPath, first.key);
    assert.throws(
      () => server.running.reloadTls(),
      /http-production: .*the private key is not the certificate's/,
    );
    assert.equal((await servedCertificate(httpsPort, NAME, second.cert)).subject.CN, 'second');
  });
});
