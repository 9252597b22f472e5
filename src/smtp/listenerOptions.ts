import os from 'node:os';
import type { SMTPServerOptions } from 'smtp-server';
import type { ListenerConfig, PosternConfig } from '../config/load.js';
import type { ServedCertificate } from '../tls/servedCertificate.js';

/** smtp-server's settings for one listener: TLS, AUTH, limits and the options the patches read. */
export function listenerOptions(
  listener: ListenerConfig,
  certificate: ServedCertificate,
  limits: PosternConfig['smtp'],
  useProxy: boolean,
): SMTPServerOptions {
  return {
    secure: listener.tls === 'implicit',
    key: certificate.pair.key,
    cert: certificate.pair.cert,
    name: limits.hostname ?? os.hostname(),
    banner: 'Postern ESMTP',
    size: limits.max_message_bytes,
    authMethods: ['PLAIN', 'LOGIN'],
    allowInsecureAuth: false,
    authOptional: false,
    authRequiredMessage:
      'Authentication required: STARTTLS, then AUTH PLAIN or LOGIN with your API key as the password',
    hideENHANCEDSTATUSCODES: false,
    hideDSN: true,
    hideREQUIRETLS: true,
    maxClients: limits.max_clients,
    maxRecipients: limits.max_recipients,
    socketTimeout: limits.idle_timeout_ms,
    closeTimeout: limits.shutdown_grace_ms,
    maxAllowedUnauthenticatedCommands: limits.max_unauthenticated_commands,
    maxCommandLength: limits.max_command_line_bytes,
    // smtp-server's own pause is a fixed 100 ms.
    ...{ greetingDelayMs: limits.greeting_delay_ms },
    rejectOversized: true,
    // The reverse DNS name is used for nothing, and the lookup held every greeting back (docs/smtp.md).
    disableReverseLookup: true,
    useProxy,
    logger: false,
  };
}
