import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * A big message waiting for room to stream is held back by Postern, not its client, and must not time out `421`: its idle
 * timeout is re-armed while held, as smtp-server 3.21's _onTimeout does while a handler has not called back.
 */
interface Connection {
  _armTimeout(): void;
}
type OnTimeout = (this: Connection) => void;
const proto = (
  connection as unknown as { SMTPConnection: { prototype: { _onTimeout: OnTimeout } } }
).SMTPConnection.prototype;
const original = proto._onTimeout;
const held = new WeakSet<object>();
proto._onTimeout = function (this: Connection): void {
  if (held.has(this)) {
    this._armTimeout();
    return;
  }
  original.call(this);
};

/** Until the returned function is called (which re-arms it afresh). */
export function holdIdleTimeout(conn: object): () => void {
  held.add(conn);
  return () => {
    if (!held.delete(conn)) return;
    (conn as Connection)._armTimeout();
  };
}
