/** provider-d: Resend, its JSON API and its SMTP relay, feedback by Standard Webhooks. Slugs and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';
import { ResendApiAdapter } from './adapter.js';
import { resendConnectionCheck } from './connectionCheck.js';
import { resendFeedback } from './feedback.js';

export const provider = {
  api: { adapter: (deps) => new ResendApiAdapter(deps), connectionCheck: resendConnectionCheck },
  smtp: { defaults: { host: () => 'smtp.resend.com', port: 587, tls: 'starttls' } },
  feedback: resendFeedback,
} satisfies ProviderCode;
