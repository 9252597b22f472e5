import nodemailer, { type Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';

/**
 * nodemailer to a Postern SMTP listener on 127.0.0.1 over STARTTLS (TLS required, the test
 * certificate not checked), with `key` as the AUTH password; `options` adds or overrides.
 */
export function starttlsTransport(port: number, key: string, options: SMTPTransport.Options = {}): Transporter<SMTPTransport.SentMessageInfo> {
  return nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    requireTLS: true,
    tls: { rejectUnauthorized: false },
    auth: { user: 'postern-test', pass: key },
    ...options,
  });
}
