/** provider-b: SendGrid, its v3 Mail Send API and its SMTP relay, feedback by the Signed Event Webhook. Slugs and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';
import { SendgridApiAdapter } from './adapter.js';
import { sendgridConnectionCheck } from './connectionCheck.js';
import { sendgridFeedback } from './feedback.js';

export const provider = {
  api: {
    adapter: (deps) => new SendgridApiAdapter(deps),
    connectionCheck: sendgridConnectionCheck,
  },
  smtp: { defaults: { host: () => 'smtp.sendgrid.net', port: 587, tls: 'starttls' } },
  feedback: sendgridFeedback,
} satisfies ProviderCode;
