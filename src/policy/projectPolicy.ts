import type { Mailbox } from '../contract/address.js';
import { ContractError } from '../contract/errors.js';
import { attachedSlugs } from '../store/providerAccounts.js';
import type { Queries } from '../store/queries.js';
import { suppressedAmong } from '../store/suppressions.js';
import type { AuthContext } from './apiKeys.js';

/** What the project policy reads of a message, whichever door it came through. */
export interface PolicyFacts {
  to: Mailbox[];
  cc: Mailbox[];
  bcc: Mailbox[];
  routing: { provider: string | string[] | null };
}

/**
 * The project-policy refusals (422), in order: no provider attached (production only: the
 * sandbox never forwards, so trying the API needs no provider), pinned providers not attached
 * (both environments, so a request that passes in the sandbox passes in production), and
 * suppressed recipients among to, cc and bcc (case-insensitive).
 */
export async function checkProjectPolicy(
  q: Queries,
  auth: AuthContext,
  message: PolicyFacts,
): Promise<void> {
  const projectId = auth.project.id;
  const slugs = await attachedSlugs(q, projectId);
  if (auth.environment === 'production' && slugs.size === 0) {
    throw new ContractError('no_providers_configured', {
      message: 'The project has no attached provider; attach one with `postern provider attach`.',
    });
  }
  const pinned =
    message.routing.provider === null
      ? []
      : Array.isArray(message.routing.provider)
        ? message.routing.provider
        : [message.routing.provider];
  const missing = pinned.filter((slug) => !slugs.has(slug));
  if (missing.length > 0) {
    throw new ContractError('routing_provider_not_configured', {
      message: `Not attached to this project: ${missing.join(', ')}.`,
    });
  }
  const recipients = [
    ...new Set([...message.to, ...message.cc, ...message.bcc].map((r) => r.email.toLowerCase())),
  ];
  const suppressed = await suppressedAmong(q, projectId, recipients);
  if (suppressed.length > 0) {
    throw new ContractError('suppressed_recipient', {
      message: `On the project's suppression list: ${suppressed.join(', ')}.`,
    });
  }
}
