import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server counts unauthenticated commands only while AUTH is offered, which Postern does only after TLS: a plaintext
 * session could NOOP for ever. This advances the library's counter for those too (mirroring smtp-server 3.21's _onCommand).
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
const proto = (
  connection as unknown as { SMTPConnection: { prototype: { _onCommand: OnCommand } } }
).SMTPConnection.prototype;
const original = proto._onCommand;
proto._onCommand = function (this: Connection, command: Buffer, callback?: () => void): void {
  const counted =
    this._ready &&
    !this._upgrading &&
    !this.session.user &&
    !this._server.options.authOptional &&
    this._maxAllowedUnauthenticatedCommands !== false &&
    // Where AUTH is offered the library counts.
    this._isDisabled('AUTH') &&
    !this._nextHandler;
  if (
    counted &&
    ++this._unauthenticatedCommands >= (this._maxAllowedUnauthenticatedCommands as number)
  ) {
    this.send(421, 'Error: too many unauthenticated commands');
    return;
  }
  original.call(this, command, callback);
};
