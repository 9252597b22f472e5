/**
 * The SMTP benchmark's client: the test suite's raw client (test/support/rawSmtp.ts), a
 * session opened with STARTTLS and AUTH PLAIN, then for each message one pipelined
 * MAIL/RCPT/DATA group followed by the body (RFC 2920, as Postfix's own client sends when the
 * server offers PIPELINING). It leaves the machine's CPU to the server under test, where
 * nodemailer's client spent about as much per message as the server did.
 */
import { authedSession, dataPayload, type RawSmtp } from '../test/support/rawSmtp.js';

/** Connects, upgrades with STARTTLS and authenticates with `key`. */
export function openBenchSession(host: string, port: number, key: string): Promise<RawSmtp> {
  return authedSession(port, key, false, host);
}

/** Sends one message; resolves with the reply to its final dot (or the first refusal). */
export async function sendPipelined(client: RawSmtp, from: string, to: string, raw: string): Promise<string> {
  client.write(`MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
  const [mail, rcpt, data] = [await client.next(), await client.next(), await client.next()];
  if (!data.startsWith('354')) return !mail.startsWith('250') ? mail : !rcpt.startsWith('250') ? rcpt : data;
  client.write(dataPayload(raw));
  return client.next();
}
