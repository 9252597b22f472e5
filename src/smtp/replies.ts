import { ContractError } from '../contract/errors.js';

/** An error smtp-server turns into a reply: `responseCode` plus the text (it adds the enhanced code). */
export interface SmtpReplyError extends Error {
  responseCode: number;
}

export function smtpError(code: number, text: string): SmtpReplyError {
  const err = new Error(text) as SmtpReplyError;
  err.responseCode = code;
  return err;
}

/**
 * The wait as a refusal's message may end by stating it for the send API: "retry in N seconds"
 * (the rate limit's), or "Retry after the number of seconds in Retry-After" (a header an SMTP
 * client never sees). A reply states the wait itself, once, at its end ("Retry in N seconds."):
 * the rate limit's reply said "retry in 57 seconds. Retry in 57 seconds."
 */
const STATED_WAIT = /[;,.]?\s*retry (?:in \d+ seconds?|after the number of seconds in Retry-After)\.?$/i;

/**
 * The reply for each refusal of the accept pipeline (docs/smtp.md, "SMTP replies"). The text always
 * starts with the contract's code, so SMTP clients can branch on it like HTTP clients do.
 *
 *   authentication_error                          535 5.7.8
 *   rate_limited, daily_send_cap_exceeded         451 4.3.0  (temporary; "retry in N seconds")
 *   monthly_quota_exceeded, throughput_quota_…    552 5.2.2  (billing state: do not retry)
 *   suppressed_recipient                          550 5.1.1
 *   sender_domain:limit_reached                   553 5.1.3
 *   other policy and validation 422s              554 5.6.0
 *   server_error                                  451 4.3.0  (nothing was stored; retry)
 *   storage_low                                   452 4.3.1  (the disk guard: retry later)
 */
export function replyFor(err: ContractError): SmtpReplyError {
  const retry = err.headers?.['Retry-After'];
  const details = err.details ? ` [${err.details.map((d) => `${d.field}: ${d.code}`).join('; ')}]` : '';
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

/** Whether `err` is an SMTP reply already (smtpError). */
export function isSmtpReply(err: unknown): err is SmtpReplyError {
  return err instanceof Error && typeof (err as Partial<SmtpReplyError>).responseCode === 'number';
}

/** A contract refusal mapped by the table, an SMTP reply as it is, anything else a 451 server fault. */
export function replyForUnknown(err: unknown): SmtpReplyError {
  if (err instanceof ContractError) return replyFor(err);
  if (isSmtpReply(err)) return err;
  return replyFor(new ContractError('server_error'));
}
