import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * Every AUTH exchange that ends without authenticating, including those smtp-server refuses without calling onAuth
 * (`AUTH FOO`, `AUTH PLAIN !!!`, an aborted one), goes to `onAuthRefused`; true: answered 421 and closed (docs/smtp.md).
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
const proto = (
  connection as unknown as { SMTPConnection: { prototype: { _onCommand: OnCommand } } }
).SMTPConnection.prototype;
const original = proto._onCommand;

/** AUTH itself, or a continuation line it asked for (334). */
function isAuthLine(conn: Connection, command: Buffer): boolean {
  // smtp-server queues a handler for the next line only inside an AUTH exchange (sasl.js).
  if (conn._nextHandler) return true;
  // The command name as smtp-server 3.21's _onCommand reads it.
  return command.toString().split(' ')[0].toUpperCase() === 'AUTH';
}

proto._onCommand = function (this: Connection, command: Buffer, callback?: () => void): void {
  const onAuthRefused = this._server.options.onAuthRefused;
  // Not an attempt: input the library discards, AUTH where it is not offered (counted as an unknown command), anything once authenticated.
  const watched =
    onAuthRefused !== undefined &&
    this._ready &&
    !this._upgrading &&
    !this.session.user &&
    !this._isDisabled('AUTH') &&
    isAuthLine(this, command);
  if (!watched) {
    original.call(this, command, callback);
    return;
  }
  original.call(this, command, () => {
    const ended = !this._nextHandler && !this.session.user;
    if (ended && onAuthRefused(this.session)) {
      this.send(421, 'Too many failed authentication attempts');
      return;
    }
    callback?.();
  });
};
