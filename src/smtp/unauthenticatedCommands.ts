import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server counts the commands of a client that has not authenticated, and closes the
 * connection with 421 at `maxAllowedUnauthenticatedCommands`, but only while AUTH is offered
 * in the session. Postern offers AUTH only once the connection is encrypted (session
 * .disabledCommands before STARTTLS, so that no key is ever invited over plaintext), which left
 * a plaintext session uncounted: any number of NOOPs kept it, and its listener slot, alive.
 * This advances the library's own counter against its own limit for those commands too, so a
 * connection has one budget of unauthenticated commands from its first command on, before and
 * after STARTTLS. The conditions mirror the library's count in smtp-server 3.21's _onCommand:
 * nothing is counted for input it discards (before the greeting, during the TLS handshake).
 */
interface Connection {
  _server: { options: { authOptional?: boolean } };
  session: { user?: unknown };
  _ready: boolean;
  _upgrading: boolean;
  _nextHandler: unknown;
  _unauthenticatedCommands: number;
  _maxAllowedUnauthenticatedCommands: number | false;
  _isDisabled(command: string): boolean;
  send(code: number, text: string, context?: unknown): void;
}
type OnCommand = (this: Connection, command: Buffer, callback?: () => void) => void;
const proto = (connection as unknown as { SMTPConnection: { prototype: { _onCommand: OnCommand } } }).SMTPConnection.prototype;
const original = proto._onCommand;
proto._onCommand = function (this: Connection, command: Buffer, callback?: () => void): void {
  const counted =
    this._ready &&
    !this._upgrading &&
    !this.session.user &&
    !this._server.options.authOptional &&
    this._maxAllowedUnauthenticatedCommands !== false &&
    // Where AUTH is offered the library counts (AUTH itself and its continuation lines excepted).
    this._isDisabled('AUTH') &&
    !this._nextHandler;
  if (counted && ++this._unauthenticatedCommands >= (this._maxAllowedUnauthenticatedCommands as number)) {
    this.send(421, 'Error: too many unauthenticated commands');
    return;
  }
  original.call(this, command, callback);
};
