import { ContractError } from '../contract/errors.js';

/** smtp-server turns it into a reply: `responseCode` plus the text (it adds the enhanced code). */
export interface SmtpReplyError extends Error {
  responseCode: number;
}

export function smtpError(code: number, text: string): SmtpReplyError {
  const err = new Error(text) as SmtpReplyError;
  err.responseCode = code;
  return err;
}

/** A wait stated for the send API; the reply states it once, at its end, in SMTP's words. */
const STATED_WAIT =
  /[;,.]?\s*retry (?:in \d+ seconds?|after the number of seconds in Retry-After)\.?$/i;

/** The reply for each refusal (docs/smtp.md#smtp-replies); the text starts with the contract's code, for clients to branch on. */
export function replyFor(err: ContractError): SmtpReplyError {
  const retry = err.headers?.['Retry-After'];
  const details = err.details
    ? ` [${err.details.map((d) => `${d.field}: ${d.code}`).join('; ')}]`
    : '';
  const message = retry ? err.message.replace(STATED_WAIT, '.') : err.message;
  const text = `${err.code}: ${message}${details}${retry ? ` Retry in ${retry} second${retry === '1' ? '' : 's'}.` : ''}`;
  if (err.code === 'storage_low') return smtpError(452, text);
  switch (err.type) {
    case 'authentication_error':
      return smtpError(535, text);
    case 'rate_limit_error':
      return smtpError(451, text);
    case 'quota_error':
      return smtpError(552, text);
    case 'api_error':
      return smtpError(451, text);
    default:
      if (err.code === 'suppressed_recipient') return smtpError(550, text);
      if (err.code === 'sender_domain:limit_reached') return smtpError(553, text);
      return smtpError(554, text);
  }
}

export function isSmtpReply(err: unknown): err is SmtpReplyError {
  return err instanceof Error && typeof (err as Partial<SmtpReplyError>).responseCode === 'number';
}

/** A contract refusal mapped by the table, an SMTP reply as it is, anything else a 451 server fault. */
export function replyForUnknown(err: unknown): SmtpReplyError {
  if (err instanceof ContractError) return replyFor(err);
  if (isSmtpReply(err)) return err;
  return replyFor(new ContractError('server_error'));
}
