import * as connection from 'smtp-server/lib/smtp-connection.js';

/**
 * The accepted-DATA reply is fixed by the operator interface as `250 2.0.0 OK queued as m.…`
 * (the form Postfix and most MTAs use), while smtp-server labels it 2.6.0 with no option to
 * change it. This narrows its status-code lookup for that one reply and nothing else.
 */
type Lookup = (this: unknown, code: number, context?: string | false) => string;
const proto = (connection as unknown as { SMTPConnection: { prototype: { _getEnhancedStatusCode: Lookup } } }).SMTPConnection.prototype;
const original = proto._getEnhancedStatusCode;
proto._getEnhancedStatusCode = function (this: unknown, code: number, context?: string | false): string {
  const enhanced = original.call(this, code, context);
  return context === 'DATA_OK' && enhanced !== '' ? '2.0.0' : enhanced;
};
