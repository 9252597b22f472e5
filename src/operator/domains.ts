import { signingDomainCandidates } from '../dkim/sign.js';
import { checkRecords, type DomainCheck } from '../domains/check.js';
import { type DnsLookup, dnsLookup } from '../domains/lookup.js';
import { type DkimKeyInput, domainNeeds, type ProviderAccountInput } from '../domains/needs.js';
import { activeDkimKey, activeDkimKeysOfDomain, listDkimKeys } from '../store/dkimKeys.js';
import { listProviderAccounts } from '../store/providerAccounts.js';
import { projectsWithSenderDomain, senderDomains } from '../store/usage.js';
import type { OperatorContext } from './context.js';
import { hostName } from './dkim.js';
import { requireProject } from './projects.js';

export interface SendingDomainView {
  domain: string;
  dkim_keys: { id: string; selector: string }[];
  sent_from: boolean;
}

export async function sendingDomains(
  ctx: OperatorContext,
  projectId: string,
): Promise<{ domains: SendingDomainView[] }> {
  await requireProject(ctx, projectId);
  const byName = new Map<string, SendingDomainView>();
  const entry = (domain: string) => {
    let view = byName.get(domain);
    if (!view) {
      view = { domain, dkim_keys: [], sent_from: false };
      byName.set(domain, view);
    }
    return view;
  };
  for (const key of await listDkimKeys(ctx.store, projectId))
    entry(key.domain).dkim_keys.push({ id: key.id, selector: key.selector });
  for (const domain of await senderDomains(ctx.store, projectId))
    entry(domain.toLowerCase()).sent_from = true;
  return {
    domains: [...byName.values()].sort((a, b) =>
      a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0,
    ),
  };
}

export interface DomainCheckOptions {
  /** Absent: every project that signs for the domain or has sent from it. */
  projectId?: string;
  lookup?: DnsLookup;
  field?: string;
}

async function projectsOf(ctx: OperatorContext, domain: string): Promise<string[]> {
  const ids = new Set<string>(await projectsWithSenderDomain(ctx.store, domain));
  for (const candidate of signingDomainCandidates(domain))
    for (const key of await activeDkimKeysOfDomain(ctx.store, candidate)) ids.add(key.project_id);
  return [...ids].sort();
}

export async function checkDomain(
  ctx: OperatorContext,
  rawDomain: string,
  opts: DomainCheckOptions = {},
): Promise<DomainCheck> {
  const domain = hostName(rawDomain.replace(/\.$/, ''), opts.field ?? 'DOMAIN');
  if (opts.projectId !== undefined) await requireProject(ctx, opts.projectId);
  const projects = opts.projectId !== undefined ? [opts.projectId] : await projectsOf(ctx, domain);
  const keys: DkimKeyInput[] = [];
  const accounts: ProviderAccountInput[] = [];
  for (const projectId of projects) {
    // Its own key, else its nearest parent's (as signing picks).
    for (const candidate of signingDomainCandidates(domain)) {
      const key = await activeDkimKey(ctx.store, projectId, candidate);
      if (!key) continue;
      keys.push(key);
      break;
    }
    for (const account of await listProviderAccounts(ctx.store, projectId)) {
      accounts.push({
        id: account.id,
        project_id: projectId,
        slug: account.slug,
        region: account.settings.region ?? null,
        domain: account.settings.domain ?? null,
      });
    }
  }
  const { needs, notes } = domainNeeds(domain, keys, accounts);
  if (projects.length === 0) {
    notes.unshift({
      slug: null,
      text: `No project has a DKIM key for ${domain} or has sent mail from it: only its SPF and DMARC records are checked. --project ID checks what a project needs.`,
    });
  } else if (keys.length === 0) {
    notes.unshift({
      slug: null,
      text: `No DKIM key signs mail from ${domain}: add one (postern dkim add, or the console's DKIM screen) and publish its record.`,
    });
  }
  return checkRecords(domain, needs, notes, opts.lookup ?? dnsLookup(ctx.config.dns), {
    projects,
    now: ctx.clock.now(),
  });
}
