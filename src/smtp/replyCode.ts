import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * The accepted-DATA reply is fixed by the operator interface as `250 2.0.0 OK queued as m.…`
 * (the form Postfix and most MTAs use), while smtp-server labels it 2.6.0 with no option to
 * change it. This narrows its status-code lookup for that one reply, and gives Postern's own
 * 452 (the disk guard: storage_low) the enhanced code RFC 3463 names for it, 4.3.1 "mail system
 * full", where smtp-server's table says 4.2.2 (mailbox full). Its own 452 (too many recipients)
 * names its context and keeps 4.5.3.
 */
type Lookup = (this: unknown, code: number, context?: string | false) => string;
const proto = (
  connection as unknown as { SMTPConnection: { prototype: { _getEnhancedStatusCode: Lookup } } }
).SMTPConnection.prototype;
const original = proto._getEnhancedStatusCode;
proto._getEnhancedStatusCode = function (
  this: unknown,
  code: number,
  context?: string | false,
): string {
  const enhanced = original.call(this, code, context);
  if (enhanced === '') return enhanced;
  if (context === 'DATA_OK') return '2.0.0';
  if (code === 452 && context === undefined) return '4.3.1';
  return enhanced;
};
