import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server's fixed 100 ms pause before its greeting, made `smtp.greeting_delay_ms` (docs/smtp.md): every listener
 * requires AUTH, so the pause protects nothing. The body is smtp-server 3.21's init() with the delay read from the option.
 */
interface Connection {
  _server: {
    options: { maxClients?: number; greetingDelayMs?: number };
    connections: Set<unknown>;
  };
  name: string;
  _setListeners(callback: () => void): void;
  send(code: number, text: string, context?: unknown): void;
  connectionReady(): void;
}
const proto = (
  connection as unknown as { SMTPConnection: { prototype: { init(this: Connection): void } } }
).SMTPConnection.prototype;
proto.init = function (this: Connection): void {
  this._setListeners(() => {
    const { maxClients, greetingDelayMs } = this._server.options;
    if (maxClients && this._server.connections.size > maxClients) {
      this.send(421, `${this.name} Too many connected clients, try again in a moment`, false);
      return;
    }
    const delay = greetingDelayMs ?? 100;
    // No pause: greeted at once (even a timer of 0 left a window where a client that wrote EHLO on connect was "too soon").
    if (delay === 0) {
      this.connectionReady();
      return;
    }
    const readyTimer = setTimeout(() => this.connectionReady(), delay);
    // Unref'd as in the library: a pending greeting does not keep the process alive.
    readyTimer.unref();
  });
};
