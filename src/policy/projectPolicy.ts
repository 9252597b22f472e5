import type { Mailbox } from '../contract/address.js';
import { ContractError } from '../contract/errors.js';
import { attachedSlugs } from '../store/providerAccounts.js';
import type { Queries } from '../store/queries.js';
import { suppressedAmong } from '../store/suppressions.js';
import type { AuthContext } from './apiKeys.js';
import type { Refusal } from './usageLimits.js';

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
 * suppressed recipients among to, cc and bcc (case-insensitive), unless `suppressions` is
 * false: the commit then reads them with its other facts (AcceptanceCommits.precheck) and
 * refuses by suppressedRefusal.
 */
export async function checkProjectPolicy(
  q: Queries,
  auth: AuthContext,
  message: PolicyFacts,
  opts: { suppressions: boolean } = { suppressions: true },
): Promise<void> {
  const projectId = auth.project.id;
  // As of the key's read: after Admission, the database's policy when the request was admitted.
  const slugs = await attachedSlugs(q, projectId, auth.policyGeneration);
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
  if (!opts.suppressions) return;
  const refusal = suppressedRefusal(
    await suppressedAmong(
      q,
      projectId,
      suppressionCandidates([...message.to, ...message.cc, ...message.bcc].map((r) => r.email)),
    ),
  );
  if (refusal) throw new ContractError(refusal.code, { message: refusal.message });
}

/** The addresses a suppression list is searched for: the recipients', in lower case, each once. */
export function suppressionCandidates(emails: readonly string[]): string[] {
  return [...new Set(emails.map((email) => email.toLowerCase()))];
}

/** The refusal for these suppressed recipients; null when there are none. */
export function suppressedRefusal(suppressed: readonly string[]): Refusal | null {
  return suppressed.length === 0
    ? null
    : {
        code: 'suppressed_recipient',
        message: `On the project's suppression list: ${suppressed.join(', ')}.`,
      };
}
