import nodemailer, { type SendMailOptions, type Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';

/**
 * nodemailer to a Postern SMTP listener on 127.0.0.1 over STARTTLS (TLS required, the test
 * certificate not checked), with `key` as the AUTH password; `options` adds or overrides.
 */
export function starttlsTransport(
  port: number,
  key: string,
  options: SMTPTransport.Options = {},
): Transporter<SMTPTransport.SentMessageInfo> {
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

/** The server's last reply to one small message sent over STARTTLS, accepted or not (`extra` adds to or overrides the message). */
export async function lastReply(
  port: number,
  key: string,
  extra: SendMailOptions = {},
): Promise<string> {
  // Well under the server's idle timeout (60 s): a reply that never comes fails here.
  const transport = starttlsTransport(port, key, { socketTimeout: 30_000 });
  try {
    return String(
      (
        await transport.sendMail({
          from: 'sender@example.com',
          to: 'rcpt@example.org',
          subject: 'Disk',
          text: 'A small message',
          ...extra,
        })
      ).response,
    );
  } catch (err) {
    const e = err as { response?: string; message: string };
    return e.response ?? `no reply: ${e.message}`;
  } finally {
    transport.close();
  }
}
