import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server's idle timeout counts while the client owes it input, which in DATA it always
 * does, as far as the library knows. A big message waiting for room in
 * `smtp.max_streamed_messages` is held back by Postern, not by its client (its DATA stream is
 * not read, so TCP stops the client), and must not be closed `421 Timeout` for that: while a
 * connection is held, its idle timeout is re-armed when it fires, as smtp-server does itself
 * while one of its handlers has not called back (smtp-server 3.21's _onTimeout).
 */
interface Connection {
  _armTimeout(): void;
}
type OnTimeout = (this: Connection) => void;
const proto = (connection as unknown as { SMTPConnection: { prototype: { _onTimeout: OnTimeout } } }).SMTPConnection.prototype;
const original = proto._onTimeout;
const held = new WeakSet<object>();
proto._onTimeout = function (this: Connection): void {
  if (held.has(this)) {
    this._armTimeout();
    return;
  }
  original.call(this);
};

/** Suspends `connection`'s idle timeout until the returned function is called (which re-arms it afresh). */
export function holdIdleTimeout(conn: object): () => void {
  held.add(conn);
  return () => {
    if (!held.delete(conn)) return;
    (conn as Connection)._armTimeout();
  };
}
