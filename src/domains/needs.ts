/** What a sending domain needs in DNS, from what Postern knows (no lookup here; docs/domains.md). */
import { type DkimAlgorithm, dnsName as dkimRecordName, dnsTxtValue } from '../dkim/keys.js';
import type { ProviderDns } from '../providers/declaration.js';
import { dnsNeedsOf } from '../providers/registry.js';
import { dnsName } from './lookup.js';

export interface RequiredBy {
  kind: 'dkim_key' | 'provider_account' | 'domain';
  /** null for the domain. */
  id: string | null;
  project_id: string | null;
  slug: string | null;
}

export type RecordPurpose = 'dkim' | 'spf' | 'dmarc' | 'return_path' | 'verification';

/** With `match`, a value the provider issues. */
export interface ValueNeed {
  kind: 'value';
  purpose: Exclude<RecordPurpose, 'spf' | 'dmarc'>;
  type: 'MX' | 'CNAME' | 'TXT';
  name: string;
  value: string;
  match: RegExp | null;
  note: string;
  required_by: RequiredBy[];
}

export interface DkimNeed {
  kind: 'dkim';
  name: string;
  value: string;
  /** What a published record must hold. */
  publicKey: string;
  selector: string;
  /** The checked one, or the parent that signs for it. */
  keyDomain: string;
  signsFor: string;
  required_by: RequiredBy[];
}

export interface SpfNeed {
  kind: 'spf';
  name: string;
  /** With the names that serve as well. */
  includes: { include: string; accepted: string[]; required_by: RequiredBy[] }[];
}

export interface DmarcNeed {
  kind: 'dmarc';
  name: string;
  domain: string;
}

export type Need = ValueNeed | DkimNeed | SpfNeed | DmarcNeed;

/** What Postern cannot check (records named per account), or what the check could not consider (slug null). */
export interface ProviderNote {
  slug: string | null;
  text: string;
}

export interface DkimKeyInput {
  id: string;
  project_id: string;
  domain: string;
  selector: string;
  algorithm: DkimAlgorithm;
  public_key: string;
}

export interface ProviderAccountInput {
  id: string;
  project_id: string;
  slug: string;
  region: string | null;
  domain: string | null;
}

export const within = (name: string, domain: string): boolean =>
  name === domain || name.endsWith(`.${domain}`);

function placeName(at: string, domain: string, returnPath: string | null): string | null {
  if (at === '@') return domain;
  if (at === '{return_path}') return returnPath;
  return `${at}.${domain}`;
}

/** The account's (when under it), else the declared default; null: not under this domain. */
function returnPathOf(
  dns: ProviderDns,
  account: ProviderAccountInput,
  domain: string,
): string | null {
  const rp = dns.return_path;
  if (!rp) return null;
  const own = rp.account_field === 'domain' && account.domain ? dnsName(account.domain) : null;
  if (own !== null && within(own, domain)) return own;
  return rp.default !== undefined ? placeName(rp.default, domain, null) : null;
}

function regionOf(dns: ProviderDns, account: ProviderAccountInput): string {
  if (!dns.region) return '';
  const region = account.region?.trim().toLowerCase() || dns.region.default;
  return dns.region.as
    ? (dns.region.as[region] ?? dns.region.as[dns.region.default] ?? '')
    : region;
}

/** Whitespace removed; '' when it has none. */
export function dkimPublicKey(value: string): string {
  for (const tag of value.split(';')) {
    const eq = tag.indexOf('=');
    if (eq > 0 && tag.slice(0, eq).trim().toLowerCase() === 'p')
      return tag.slice(eq + 1).replace(/\s+/g, '');
  }
  return '';
}

function addRequirer(list: RequiredBy[], by: RequiredBy): void {
  if (!list.some((r) => r.kind === by.kind && r.id === by.id)) list.push(by);
}

/** In a fixed order: DKIM, SPF, DMARC, then the providers' records. */
export function domainNeeds(
  domain: string,
  keys: DkimKeyInput[],
  accounts: ProviderAccountInput[],
): { needs: Need[]; notes: ProviderNote[] } {
  const needs: Need[] = [];
  const notes: ProviderNote[] = [];

  for (const key of keys) {
    const name = dkimRecordName(key.selector, key.domain);
    const by: RequiredBy = { kind: 'dkim_key', id: key.id, project_id: key.project_id, slug: null };
    const existing = needs.find(
      (n): n is DkimNeed =>
        n.kind === 'dkim' &&
        n.name === name &&
        n.value === dnsTxtValue(key.algorithm, key.public_key),
    );
    if (existing) {
      addRequirer(existing.required_by, by);
      continue;
    }
    const value = dnsTxtValue(key.algorithm, key.public_key);
    needs.push({
      kind: 'dkim',
      name,
      value,
      publicKey: dkimPublicKey(value),
      selector: key.selector,
      keyDomain: key.domain,
      signsFor: domain,
      required_by: [by],
    });
  }

  const spf = new Map<string, SpfNeed>([[domain, { kind: 'spf', name: domain, includes: [] }]]);
  const records: ValueNeed[] = [];
  const noted = new Set<string>();
  for (const account of accounts) {
    const declared = dnsNeedsOf(account.slug);
    if (!declared) continue;
    const { dns } = declared;
    const by: RequiredBy = {
      kind: 'provider_account',
      id: account.id,
      project_id: account.project_id,
      slug: account.slug,
    };
    const returnPath = returnPathOf(dns, account, domain);
    if (dns.return_path && returnPath === null) {
      notes.push({
        slug: account.slug,
        text: account.domain
          ? `Account ${account.id} sends as ${account.domain}, which is not under ${domain}: its bounce records belong to that domain (postern domain check ${account.domain}).`
          : `Account ${account.id} names no sending domain (its "domain" field): its bounce records cannot be named until it does.`,
      });
    }
    const fill = (text: string) =>
      text.replaceAll('{region}', regionOf(dns, account)).replaceAll('{domain}', domain);
    for (const need of dns.spf ?? []) {
      const name = placeName(need.at, domain, returnPath);
      if (name === null) continue;
      let record = spf.get(name);
      if (!record) {
        record = { kind: 'spf', name, includes: [] };
        spf.set(name, record);
      }
      let include = record.includes.find((i) => i.include === need.include);
      if (!include) {
        include = {
          include: need.include,
          accepted: [need.include, ...(need.also_accepted ?? [])],
          required_by: [],
        };
        record.includes.push(include);
      }
      addRequirer(include.required_by, by);
    }
    for (const r of dns.records ?? []) {
      const name = placeName(r.at, domain, returnPath);
      if (name === null || (r.not_at_apex && name === domain)) continue;
      const value = fill(r.value);
      const existing = records.find(
        (n) => n.type === r.type && n.name === name && n.value === value,
      );
      if (existing) {
        addRequirer(existing.required_by, by);
        continue;
      }
      records.push({
        kind: 'value',
        purpose: r.purpose,
        type: r.type,
        name,
        value,
        match: r.match ? new RegExp(r.match, 'i') : null,
        note: r.note,
        required_by: [by],
      });
    }
    for (const text of dns.notes ?? []) {
      const key = `${declared.provider}\u0000${text}`;
      if (noted.has(key)) continue;
      noted.add(key);
      notes.push({ slug: account.slug, text });
    }
  }
  needs.push(...spf.values(), { kind: 'dmarc', name: `_dmarc.${domain}`, domain }, ...records);
  return { needs, notes };
}
