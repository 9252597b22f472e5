/** provider-a: Amazon SES, its API v2 and its regional SMTP relay, feedback by SNS. Slugs and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';
import { optionHeader } from '../smtpRelay.js';
import { SES_DEFAULT_REGION, SesApiAdapter } from './adapter.js';
import { sesConnectionCheck } from './connectionCheck.js';
import { sesFeedback } from './feedback.js';

export const provider = {
  api: { adapter: (deps) => new SesApiAdapter(deps), connectionCheck: sesConnectionCheck },
  smtp: {
    defaults: {
      host: (region) => `email-smtp.${region ?? SES_DEFAULT_REGION}.amazonaws.com`,
      port: 587,
      tls: 'starttls',
    },
    optionHeaders: (options) =>
      optionHeader('X-SES-CONFIGURATION-SET', options['provider-a-api']?.configuration_set),
    // `250 Ok <SES message id>`: the id SES's SNS feedback quotes.
    messageIdFromReply: (reply) => /^250\s+Ok\s+(\S+)/i.exec(reply)?.[1] ?? null,
  },
  feedback: sesFeedback,
} satisfies ProviderCode;
