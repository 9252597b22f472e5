/** provider-e: Postmark, its JSON API and its SMTP relay, feedback by webhooks with a secret URL. Slugs and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';
import { optionHeader } from '../smtpRelay.js';
import { PostmarkApiAdapter } from './adapter.js';
import { postmarkConnectionCheck } from './connectionCheck.js';
import { postmarkFeedback } from './feedback.js';

export const provider = {
  api: {
    adapter: (deps) => new PostmarkApiAdapter(deps),
    connectionCheck: postmarkConnectionCheck,
  },
  smtp: {
    defaults: { host: () => 'smtp.postmarkapp.com', port: 587, tls: 'starttls' },
    optionHeaders: (options) =>
      optionHeader('X-PM-Message-Stream', options['provider-e-api']?.message_stream),
  },
  feedback: postmarkFeedback,
} satisfies ProviderCode;
