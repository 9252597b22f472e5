/**
 * What src/smtp patches in smtp-server (replyCode.ts, greetingDelay.ts, unauthenticatedCommands.ts,
 * authAttempts.ts, commandLineLength.ts, heldSessions.ts) and reaches into (server.ts: the server's connection set, a connection's
 * session, send, close and socket; proxyProtocol.ts: the server's PROXY header reading), checked against the installed library before any patch is
 * loaded. A failure here means an upgrade changed what a patch assumes: re-read that patch
 * against the new library, then move the exact pin in package.json.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import * as connectionModule from 'smtp-server/lib/smtp-connection.js';
import * as streamModule from 'smtp-server/lib/smtp-stream.js';
import { repoRoot } from '../support/paths.js';

type Method = (...args: unknown[]) => unknown;
const prototype = (
  connectionModule as unknown as { SMTPConnection: { prototype: Record<string, Method> } }
).SMTPConnection.prototype;

/** Each method a patch replaces, wraps or calls, with the number of parameters it is called with. */
const ARITY: Record<string, number> = {
  init: 0, // greetingDelay.ts replaces it
  _setListeners: 1, // greetingDelay.ts: called with the callback that greets
  connectionReady: 1, // greetingDelay.ts: called after the pause
  _getEnhancedStatusCode: 2, // replyCode.ts wraps it: (code, context)
  _onCommand: 2, // unauthenticatedCommands.ts and authAttempts.ts wrap it: (command, callback)
  _isDisabled: 1, // unauthenticatedCommands.ts and authAttempts.ts: whether AUTH is offered
  _createParser: 0, // commandLineLength.ts wraps it
  send: 3, // every patch and server.ts: (code, text, context)
  close: 0, // commandLineLength.ts and server.ts
  _onTimeout: 0, // heldSessions.ts wraps it
  _armTimeout: 0, // heldSessions.ts re-arms with it: (socket = this._socket)
};
/** The ones the patches replace: taken now, before any patch module is loaded. */
const REPLACED = ['init', '_getEnhancedStatusCode', '_onCommand', '_createParser', '_onTimeout'];
const original = Object.fromEntries(REPLACED.map((name) => [name, prototype[name]]));

/** A method's source without comments and with its whitespace collapsed. */
function code(method: Method): string {
  return method
    .toString()
    .replace(/\/\/[^\n]*/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Whether `source` holds `parts` in that order. */
function inOrder(source: string, parts: string[]): boolean {
  let at = 0;
  for (const part of parts) {
    at = source.indexOf(part, at);
    if (at === -1) return false;
    at += part.length;
  }
  return true;
}

describe('smtp-server is pinned, and the internals Postern patches have the shape its patches assume', () => {
  test('package.json pins smtp-server to one exact version: the one installed and the one locked', () => {
    const manifest = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const lock = JSON.parse(readFileSync(path.join(repoRoot, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dependencies?: Record<string, string> }>;
    };
    const installed = (
      createRequire(import.meta.url)('smtp-server/package.json') as { version: string }
    ).version;
    const pinned = manifest.dependencies['smtp-server'];
    assert.match(pinned, /^\d+\.\d+\.\d+$/, 'an exact version, no range');
    assert.equal(installed, pinned);
    assert.equal(lock.packages['']?.dependencies?.['smtp-server'], pinned);
    assert.equal(lock.packages['node_modules/smtp-server']?.version, pinned);
  });

  test('each method a patch replaces, wraps or calls exists on SMTPConnection with the arity the patch assumes', () => {
    const found = Object.fromEntries(
      Object.keys(ARITY).map((name) => [
        name,
        typeof prototype[name] === 'function' ? prototype[name].length : typeof prototype[name],
      ]),
    );
    assert.deepEqual(found, ARITY);
  });

  test('init is the body greetingDelay.ts restates: the maxClients refusal, then the fixed 100 ms pause before the greeting', () => {
    assert.equal(
      code(original.init),
      "init() { this._setListeners(() => { if (this._server.options.maxClients && this._server.connections.size > this._server.options.maxClients) { return this.send(421, this.name + ' Too many connected clients, try again in a moment', false); } let readyTimer = setTimeout(() => this.connectionReady(), 100); readyTimer.unref(); }); }",
    );
  });

  test('_onCommand counts unauthenticated commands under the conditions unauthenticatedCommands.ts mirrors', () => {
    assert.ok(
      inOrder(code(original._onCommand), [
        // Input discarded during the TLS handshake and before the greeting is never counted.
        'if (this._upgrading) { return done(); }',
        "if (!this._ready) { return this.send(421, this.name + ' You talk too soon', commandName); }",
        // A continuation line (AUTH's) runs the queued handler.
        'if (this._nextHandler) { handler = this._nextHandler; this._nextHandler = false; }',
        "if (!this.session.user && this._isSupported('AUTH') && !this._server.options.authOptional && commandName !== 'AUTH' && this._maxAllowedUnauthenticatedCommands !== false) { this._unauthenticatedCommands++; if (this._unauthenticatedCommands >= this._maxAllowedUnauthenticatedCommands) { return this.send(421, 'Error: too many unauthenticated commands', commandName); } }",
      ]),
      code(original._onCommand),
    );
    // AUTH is offered exactly when it is not disabled (the patch counts where it is disabled).
    assert.match(code(prototype._isSupported), /return !this\._isDisabled\(command\) && /);
  });

  test('only an AUTH exchange queues a handler for the next line, and the handler callback ends each line (authAttempts.ts)', () => {
    // The connection's own methods only ever clear _nextHandler; the SASL steps (sasl.js) set it.
    const setters = Object.entries(Object.getOwnPropertyDescriptors(prototype))
      .filter(
        ([, d]) =>
          typeof d.value === 'function' &&
          /this\._nextHandler = (?!false)/.test(code(d.value as Method)),
      )
      .map(([name]) => name);
    assert.deepEqual(setters, []);
    // An AUTH it cannot try is answered and ended without onAuth; the rest goes to the mechanism.
    assert.ok(
      inOrder(code(prototype.handler_AUTH), [
        "this.send(538, 'Error: Must issue a STARTTLS command first'); return callback();",
        "this.send(503, 'Error: No identity changes permitted'); return callback();",
        "this.send(504, 'Error: Unrecognized authentication type'); return callback();",
        'handler(args, callback);',
      ]),
      code(prototype.handler_AUTH),
    );
    // Every line's handler gets a callback that ends it: the patch sees each exchange end there.
    assert.ok(
      inOrder(code(original._onCommand), [
        'const next = callback || (() => false);',
        'const done = () => this._whenWritable(next);',
        'handler.call(this, command, handlerCallback);',
      ]),
    );
  });

  test('_onTimeout re-arms with _armTimeout while a handler is pending (the rule heldSessions.ts extends to a held DATA), else answers 421', () => {
    assert.ok(
      inOrder(code(original._onTimeout), [
        'if (this._handlerPending || (this._dataStream && this._parser && !this._parser._dataMode)) { this._armTimeout(); return; }',
        "this.send(421, 'Timeout - closing connection');",
      ]),
      code(original._onTimeout),
    );
    assert.ok(
      code(prototype._armTimeout).includes(
        'socket.setTimeout(socketTimeout(this._server.options), () => this._onTimeout());',
      ),
      code(prototype._armTimeout),
    );
  });

  test("_createParser's parser answers its errors with 421 in one listener, the one commandLineLength.ts replaces", () => {
    assert.ok(
      code(original._createParser).includes(
        "parser.on('error', err => { this.send(421, 'Error: ' + err.message); });",
      ),
      code(original._createParser),
    );
  });

  describe('a live connection', () => {
    const servers: SMTPServer[] = [];
    const sockets: net.Socket[] = [];
    after(async () => {
      for (const s of sockets) s.destroy();
      await Promise.all(
        servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
      );
    });

    test('carries the options, state and methods the patches and server.ts read, and labels the accepted-DATA reply 2.6.0', async () => {
      let connected!: (session: SMTPServerSession) => void;
      const session = new Promise<SMTPServerSession>((resolve) => (connected = resolve));
      const server = new SMTPServer({
        authOptional: false,
        hideENHANCEDSTATUSCODES: false,
        maxClients: 3,
        maxAllowedUnauthenticatedCommands: 5,
        logger: false,
        // Unknown to the library: greetingDelay.ts reads it from the server's options.
        ...{ greetingDelayMs: 7 },
        onConnect(s, callback) {
          connected(s);
          callback();
        },
      });
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      const port = (server.server.address() as net.AddressInfo).port;
      sockets.push(net.connect(port, '127.0.0.1'));
      const live = await session;

      const connections = (server as unknown as { connections: unknown }).connections;
      assert.ok(connections instanceof Set);
      const connection = [...(connections as Set<Record<string, unknown>>)].find(
        (c) => c.session === live,
      );
      assert.ok(connection, 'server.connections holds each connection, found by its session');
      const options = (connection._server as { options: Record<string, unknown> }).options;
      assert.equal(connection._server, server);
      assert.equal(options.greetingDelayMs, 7);
      assert.equal(options.maxClients, 3);
      assert.equal(options.authOptional, false);
      assert.ok(connection._socket instanceof net.Socket);
      assert.equal(typeof connection.name, 'string');
      assert.equal(typeof connection._ready, 'boolean');
      assert.equal(connection._upgrading, false);
      assert.equal(connection._nextHandler, false);
      assert.equal(connection._unauthenticatedCommands, 0);
      assert.equal(connection._maxAllowedUnauthenticatedCommands, 5);
      const call = (name: string, ...args: unknown[]) =>
        (prototype[name] as Method).call(connection, ...args);
      // server.ts turns AUTH off per session until TLS; the library reads it back from there.
      live.disabledCommands = ['AUTH'];
      assert.equal(call('_isDisabled', 'AUTH'), true);
      live.disabledCommands = [];
      assert.equal(call('_isDisabled', 'AUTH'), false);
      // The reply context replyCode.ts narrows, and the label it replaces.
      assert.equal(original._getEnhancedStatusCode.call(connection, 250, 'DATA_OK'), '2.6.0');
    });
  });

  test('the line parser fails an over-long command line with the message commandLineLength.ts matches', async () => {
    const { TOO_LONG } = await import('../../src/smtp/commandLineLength.js');
    const { SMTPStream } = streamModule as unknown as {
      SMTPStream: new (options: { maxCommandLength: number }) => NodeJS.WritableStream;
    };
    const parser = new SMTPStream({ maxCommandLength: 16 });
    const failed = new Promise<Error>((resolve) => parser.once('error', resolve));
    parser.write(`NOOP ${'x'.repeat(100)}\r\n`);
    assert.equal((await failed).message, TOO_LONG);
  });

  test('the PROXY header is read by _handleProxy and expected where _expectsProxyHeader says, both called on the server instance (proxyProtocol.ts replaces them there); a refused header ends the socket with "* BAD"', () => {
    const server = SMTPServer.prototype as unknown as Record<string, Method>;
    assert.deepEqual([server._expectsProxyHeader.length, server._handleProxy.length], [1, 2]);
    // The connection handler in the constructor asks the instance, so a replacement on it is used.
    assert.ok(
      inOrder(code(SMTPServer as unknown as Method), [
        'this._acceptSocket(socket, handshake);',
        'this._handleProxy(socket, (err, socketOptions) => {',
        'this.connect(socket, socketOptions);',
      ]),
    );
    assert.ok(
      code(server._acceptSocket).includes('if (!handshake && !this._expectsProxyHeader(socket)) {'),
      code(server._acceptSocket),
    );
    assert.ok(
      inOrder(code(server._handleProxy), [
        'if (!this._expectsProxyHeader(socket)) {',
        // A refused header: the diagnostic, then the socket ended (proxyProtocol.ts tells it by writableEnded).
        'if (socket.writableEnded) {',
        "socket.end('* BAD Invalid PROXY header\\r\\n');",
        // The client address becomes the session's.
        'socketOptions.remoteAddress = proxiedAddress;',
      ]),
      code(server._handleProxy),
    );
  });

  test('each patch module replaces its method on the prototype the server uses', async () => {
    await import('../../src/smtp/replyCode.js');
    await import('../../src/smtp/greetingDelay.js');
    await import('../../src/smtp/unauthenticatedCommands.js');
    await import('../../src/smtp/authAttempts.js');
    await import('../../src/smtp/commandLineLength.js');
    await import('../../src/smtp/heldSessions.js');
    assert.deepEqual(
      REPLACED.filter((name) => prototype[name] === original[name]),
      [],
    );
  });
});
