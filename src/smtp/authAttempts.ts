import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server answers an AUTH it cannot even try itself, without calling onAuth: an unknown
 * mechanism (`AUTH FOO`, 504), a PLAIN token that is not three NUL-separated fields
 * (`AUTH PLAIN !!!`, 501), an exchange the client aborts (`*`, 501), AUTH before EHLO (503).
 * And AUTH is the one command it never counts as unauthenticated. So those lines were counted
 * nowhere: one session sent 520,951 of them in 7.9 s. This hands every AUTH exchange that ends
 * without authenticating, whoever refused it, to the server's `onAuthRefused(session)` option
 * (server.ts counts it as a failed attempt); when that answers true, the session has had its
 * share: it is answered 421 and closed, and nothing more is read from it.
 */
type OnAuthRefused = (session: unknown) => boolean;
interface Connection {
  _server: { options: { onAuthRefused?: OnAuthRefused } };
  session: { user?: unknown };
  _ready: boolean;
  _upgrading: boolean;
  _nextHandler: unknown;
  _isDisabled(command: string): boolean;
  send(code: number, text: string, context?: unknown): void;
}
type OnCommand = (this: Connection, command: Buffer, callback?: () => void) => void;
const proto = (connection as unknown as { SMTPConnection: { prototype: { _onCommand: OnCommand } } }).SMTPConnection.prototype;
const original = proto._onCommand;

/** Whether `command` is a line of an AUTH exchange: AUTH itself, or a continuation line it asked for (334). */
function isAuthLine(conn: Connection, command: Buffer): boolean {
  // smtp-server queues a handler for the next line only inside an AUTH exchange (sasl.js).
  if (conn._nextHandler) return true;
  // The command name as the library reads it (smtp-server 3.21's _onCommand).
  return command.toString().split(' ')[0].toUpperCase() === 'AUTH';
}

proto._onCommand = function (this: Connection, command: Buffer, callback?: () => void): void {
  const onAuthRefused = this._server.options.onAuthRefused;
  // Input the library discards (before the greeting, during the TLS handshake) is not an
  // attempt; nor is AUTH where it is not offered (before STARTTLS it is an unknown command,
  // counted as one); nor anything once the session has authenticated.
  const watched =
    onAuthRefused !== undefined && this._ready && !this._upgrading && !this.session.user && !this._isDisabled('AUTH') && isAuthLine(this, command);
  if (!watched) {
    original.call(this, command, callback);
    return;
  }
  original.call(this, command, () => {
    // The exchange goes on (a 334 asked for the next line) or it ended: authenticated, or refused.
    const ended = !this._nextHandler && !this.session.user;
    if (ended && onAuthRefused(this.session)) {
      this.send(421, 'Too many failed authentication attempts');
      return;
    }
    callback?.();
  });
};
