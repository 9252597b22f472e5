import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server waits a fixed 100 ms before its 220 greeting to catch clients that talk first
 * (early-talker detection, an MX defence against spambots), with no option to change it.
 * Every Postern listener requires AUTH, so the pause protects nothing there and costs every
 * legitimate connection 100 ms (a tenth of a second per message for an app that connects per
 * message). This makes the pause the server's `greetingDelayMs` option (`smtp.greeting_delay_ms`),
 * the library's 100 ms where that option is absent. With a pause, a client that talks before the
 * greeting is still refused; with none, it is greeted at once. The body is smtp-server 3.21's
 * init() with the delay read from the option.
 */
interface Connection {
  _server: { options: { maxClients?: number; greetingDelayMs?: number }; connections: Set<unknown> };
  name: string;
  _setListeners(callback: () => void): void;
  send(code: number, text: string, context?: unknown): void;
  connectionReady(): void;
}
const proto = (connection as unknown as { SMTPConnection: { prototype: { init(this: Connection): void } } }).SMTPConnection.prototype;
proto.init = function (this: Connection): void {
  this._setListeners(() => {
    const { maxClients, greetingDelayMs } = this._server.options;
    if (maxClients && this._server.connections.size > maxClients) {
      this.send(421, `${this.name} Too many connected clients, try again in a moment`, false);
      return;
    }
    const delay = greetingDelayMs ?? 100;
    // No pause: greeted at once, so there is no window in which a client is "too soon" (even a
    // timer of 0 left one, and a client that wrote EHLO on connect was refused).
    if (delay === 0) {
      this.connectionReady();
      return;
    }
    const readyTimer = setTimeout(() => this.connectionReady(), delay);
    // Unref'd as in the library: a pending greeting does not keep the process alive.
    readyTimer.unref();
  });
};
