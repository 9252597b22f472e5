import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server refuses a command line longer than its `maxCommandLength` option
 * (`smtp.max_command_line_bytes`) by failing the connection's line parser, which it answers
 * `421 Error: Command line too long`: a temporary reply, after which a client's queue would send
 * the same line again and again. This answers it with the reply RFC 5321 gives for the case
 * (section 4.5.3.1.10), `500 5.5.2 Line too long`, a permanent one. The connection is still
 * closed: the parser, once failed, reads nothing more, and without reading the rest of the line
 * nobody knows where the next command would start. Other parser errors keep the library's reply.
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
const proto = (connection as unknown as { SMTPConnection: { prototype: { _createParser: CreateParser } } }).SMTPConnection.prototype;
const original = proto._createParser;
/** The message smtp-server 3.21's line parser fails with (smtp-stream.js, _commandTooLong). */
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
