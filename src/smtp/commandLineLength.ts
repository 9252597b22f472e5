import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * A command line over `smtp.max_command_line_bytes` answered `500 5.5.2 Line too long` (RFC 5321 §4.5.3.1.10), not
 * smtp-server's temporary 421, which clients retry for ever. Still closed: where the next command starts is unknown.
 */
interface Parser {
  removeAllListeners(event: 'error'): Parser;
  on(event: 'error', listener: (err: Error) => void): Parser;
}
interface Connection {
  send(code: number, text: string, context?: unknown): void;
  close(): void;
}
type CreateParser = (this: Connection) => Parser;
const proto = (
  connection as unknown as { SMTPConnection: { prototype: { _createParser: CreateParser } } }
).SMTPConnection.prototype;
const original = proto._createParser;
/** smtp-server 3.21's smtp-stream.js, _commandTooLong. */
export const TOO_LONG = 'Command line too long';
proto._createParser = function (this: Connection): Parser {
  const parser = original.call(this);
  parser.removeAllListeners('error');
  parser.on('error', (err) => {
    if (err.message !== TOO_LONG) {
      this.send(421, `Error: ${err.message}`);
      return;
    }
    this.send(500, 'Line too long');
    this.close();
  });
  return parser;
};
