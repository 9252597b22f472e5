/** provider-c: Mailgun, its MIME API and its SMTP relay (US or EU), feedback by signed webhooks. Slugs and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';
import { MailgunApiAdapter } from './adapter.js';
import { mailgunConnectionCheck } from './connectionCheck.js';
import { mailgunFeedback } from './feedback.js';

export const provider = {
  api: { adapter: (deps) => new MailgunApiAdapter(deps), connectionCheck: mailgunConnectionCheck },
  smtp: {
    defaults: {
      host: (region) => (region === 'eu' ? 'smtp.eu.mailgun.org' : 'smtp.mailgun.org'),
      port: 587,
      tls: 'starttls',
    },
  },
  feedback: mailgunFeedback,
} satisfies ProviderCode;
