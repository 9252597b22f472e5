/** provider-f: Brevo, its JSON API and its SMTP relay, feedback by webhooks with a secret URL or token. Slugs and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';
import { BrevoApiAdapter } from './adapter.js';
import { brevoConnectionCheck } from './connectionCheck.js';
import { brevoFeedback } from './feedback.js';

export const provider = {
  api: { adapter: (deps) => new BrevoApiAdapter(deps), connectionCheck: brevoConnectionCheck },
  smtp: { defaults: { host: () => 'smtp-relay.brevo.com', port: 587, tls: 'starttls' } },
  feedback: brevoFeedback,
} satisfies ProviderCode;
