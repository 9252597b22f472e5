/** A sending domain's needed records looked up in DNS and judged: the console document's DomainCheck. */
import type { DnsLookup } from './lookup.js';
import { dnsName } from './lookup.js';
import { dkimPublicKey, type DkimNeed, type DmarcNeed, type Need, type ProviderNote, type RecordPurpose, type RequiredBy, type SpfNeed, type ValueNeed } from './needs.js';
import { SPF_LOOKUP_LIMIT, isSpf, mergeSpf, newSpf, spfIncludes, spfLookups, withIncludes } from './spf.js';

export type RecordState = 'present' | 'missing' | 'different' | 'lookup_failed';

export interface Problem {
  severity: 'error' | 'warning';
  code: string;
  message: string;
}

export interface CheckedRecord {
  purpose: RecordPurpose;
  type: 'TXT' | 'MX' | 'CNAME';
  name: string;
  /** For SPF and DMARC the whole record (the one found, with what it lacks added). */
  value: string;
  /** false: the provider issues the value per account; `note` says where to find it. */
  value_exact: boolean;
  state: RecordState;
  found: string[];
  note: string | null;
  /** SPF: nested includes counted; null for other records. */
  dns_lookups: number | null;
  problems: Problem[];
  required_by: RequiredBy[];
}

export interface DomainCheck {
  domain: string;
  checked_at: string;
  projects: string[];
  status: 'ok' | 'action_needed' | 'incomplete';
  records: CheckedRecord[];
  notes: ProviderNote[];
}

const DOMAIN_ITSELF: RequiredBy = { kind: 'domain', id: null, project_id: null, slug: null };

function lookupProblem(name: string, type: string, failed: string): Problem {
  return { severity: 'error', code: 'lookup_failed', message: `The ${type} lookup of ${name} got no answer (${failed}): the record's state is not known; try again, or check dns.servers.` };
}

function longTxtNote(value: string): string {
  return value.length > 255 ? ` The value is ${value.length} characters: most DNS hosts split it into 255-character strings themselves; in a zone file, write it as several quoted strings on one record.` : '';
}

async function checkDkim(need: DkimNeed, lookup: DnsLookup): Promise<CheckedRecord> {
  const answer = await lookup.txt(need.name);
  const parent = need.keyDomain !== need.signsFor ? ` It signs mail from ${need.signsFor} too: the project has no key of that domain's own, and d=${need.keyDomain} aligns with it.` : '';
  const base: CheckedRecord = {
    purpose: 'dkim',
    type: 'TXT',
    name: need.name,
    value: need.value,
    value_exact: true,
    state: 'missing',
    found: answer.records,
    note: `The public half of the DKIM key (selector ${need.selector}) Postern signs mail from ${need.keyDomain} with: receivers compare its p= with the signatures.${parent}${longTxtNote(need.value)}`,
    dns_lookups: null,
    problems: [],
    required_by: need.required_by,
  };
  if (answer.failed) return { ...base, state: 'lookup_failed', problems: [lookupProblem(need.name, 'TXT', answer.failed)] };
  if (answer.records.length === 0) return base;
  const keys = answer.records.map(dkimPublicKey);
  if (keys.includes(need.publicKey)) {
    const problems: Problem[] =
      answer.records.length > 1
        ? [{ severity: 'warning', code: 'dkim_multiple_records', message: `${need.name} has ${answer.records.length} TXT records: a receiver may read another one and fail the signature. Keep only this key's.` }]
        : [];
    return { ...base, state: 'present', problems };
  }
  const revoked = keys.some((k) => k === '');
  return {
    ...base,
    state: 'different',
    problems: [
      {
        severity: 'error',
        code: 'dkim_key_differs',
        message: revoked
          ? `${need.name} publishes an empty p= (a revoked key): signatures with selector ${need.selector} fail. Publish the value above.`
          : `${need.name} publishes another public key: signatures with selector ${need.selector} fail. Publish the value above.`,
      },
    ],
  };
}

function includeList(need: SpfNeed): string {
  return need.includes.map((i) => `include:${i.include} (${[...new Set(i.required_by.map((r) => r.slug ?? r.kind))].join(', ')})`).join(', ');
}

async function checkSpf(need: SpfNeed, lookup: DnsLookup): Promise<CheckedRecord> {
  const answer = await lookup.txt(need.name);
  const found = answer.records.filter(isSpf);
  const needed = need.includes;
  const note =
    needed.length > 0
      ? `SPF: the servers allowed to send mail whose bounce address is at ${need.name}. Needed here: ${includeList(need)}.`
      : `SPF: the servers allowed to send mail whose bounce address is at ${need.name}. No attached provider needs an include here (theirs go on their own bounce domains); if other servers send mail as ${need.name} (your own mail service), add their mechanisms before ~all.`;
  const requiredBy = needed.length > 0 ? needed.flatMap((i) => i.required_by).filter((r, i, all) => all.findIndex((o) => o.kind === r.kind && o.id === r.id) === i) : [DOMAIN_ITSELF];
  const lacking = (record: string) => {
    const has = spfIncludes(record);
    return needed.filter((i) => !i.accepted.some((a) => has.includes(a))).map((i) => i.include);
  };
  const problems: Problem[] = [];
  let state: RecordState;
  let value: string;
  if (answer.failed) {
    state = 'lookup_failed';
    value = newSpf(needed.map((i) => i.include));
    problems.push(lookupProblem(need.name, 'TXT', answer.failed));
  } else if (found.length === 0) {
    state = 'missing';
    value = newSpf(needed.map((i) => i.include));
  } else if (found.length > 1) {
    state = 'different';
    const merged = mergeSpf(found);
    value = withIncludes(merged, lacking(merged));
    problems.push({
      severity: 'error',
      code: 'spf_multiple_records',
      message: `${need.name} has ${found.length} SPF records: receivers treat that as a permanent error (RFC 7208 §4.5) and SPF fails for every message. Replace them with the one record above.`,
    });
  } else {
    const missing = lacking(found[0]);
    state = missing.length === 0 ? 'present' : 'different';
    value = missing.length === 0 ? found[0] : withIncludes(found[0], missing);
  }
  const lookups = await spfLookups(value, lookup, 0, [dnsName(need.name)]);
  if (lookups > SPF_LOOKUP_LIMIT) {
    problems.push({
      severity: 'warning',
      code: 'spf_too_many_lookups',
      message: `This SPF record needs more than ${SPF_LOOKUP_LIMIT} DNS lookups (include, a, mx, ptr, exists, redirect, nested includes counted): receivers stop at ${SPF_LOOKUP_LIMIT} and SPF fails (RFC 7208 §4.6.4). Drop includes no longer used, or replace some with ip4:/ip6: ranges.`,
    });
  }
  if (/(^|\s)\+?all(\s|$)/i.test(value)) {
    problems.push({ severity: 'warning', code: 'spf_allows_all', message: `The record ends in +all: every server on the internet may send as ${need.name}. Use ~all or -all.` });
  }
  return { purpose: 'spf', type: 'TXT', name: need.name, value, value_exact: true, state, found, note, dns_lookups: Math.min(lookups, SPF_LOOKUP_LIMIT + 1), problems, required_by: requiredBy };
}

/** RFC 7489 §6.4; null unless it starts with v=DMARC1. */
function dmarcTags(record: string): Map<string, string> | null {
  const tags = new Map<string, string>();
  const parts = record.split(';').map((p) => p.trim()).filter(Boolean);
  for (const part of parts) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    tags.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
  }
  return parts[0]?.replace(/\s+/g, '').toLowerCase() === 'v=dmarc1' ? tags : null;
}

const isDmarc = (txt: string): boolean => /^v\s*=\s*DMARC1\s*(;|$)/i.test(txt.trim());

/** DMARCbis's tree walk, down to two labels (no public-suffix list). */
function dmarcParents(domain: string): string[] {
  const labels = domain.split('.');
  const out: string[] = [];
  for (let i = 1; i <= labels.length - 2; i++) out.push(labels.slice(i).join('.'));
  return out;
}

async function checkDmarc(need: DmarcNeed, lookup: DnsLookup): Promise<CheckedRecord> {
  const suggested = `v=DMARC1; p=none; rua=mailto:dmarc-reports@${need.domain}`;
  const base: CheckedRecord = {
    purpose: 'dmarc',
    type: 'TXT',
    name: need.name,
    value: suggested,
    value_exact: true,
    state: 'missing',
    found: [],
    note: `DMARC: what receivers do with mail from ${need.domain} that fails SPF and DKIM alignment, and where they send reports. rua= is a mailbox of yours for the daily aggregate reports (dmarc-reports@${need.domain} is a suggestion); start with p=none, and move to p=quarantine, then p=reject, once the reports show your mail passing.`,
    dns_lookups: null,
    problems: [],
    required_by: [DOMAIN_ITSELF],
  };
  const answer = await lookup.txt(need.name);
  if (answer.failed) return { ...base, state: 'lookup_failed', problems: [lookupProblem(need.name, 'TXT', answer.failed)] };
  const found = answer.records.filter(isDmarc);
  if (found.length > 1) {
    return {
      ...base,
      state: 'different',
      found,
      problems: [{ severity: 'error', code: 'dmarc_multiple_records', message: `${need.name} has ${found.length} DMARC records: receivers then apply none (RFC 7489 §6.6.3). Keep one.` }],
    };
  }
  if (found.length === 1) return judgeDmarc(base, found[0], null);
  for (const parent of dmarcParents(need.domain)) {
    const inherited = await lookup.txt(`_dmarc.${parent}`);
    if (inherited.failed) return { ...base, state: 'lookup_failed', problems: [lookupProblem(`_dmarc.${parent}`, 'TXT', inherited.failed)] };
    const records = inherited.records.filter(isDmarc);
    if (records.length === 1) return judgeDmarc(base, records[0], parent);
    if (records.length > 1) break;
  }
  return base;
}

function judgeDmarc(base: CheckedRecord, record: string, parent: string | null): CheckedRecord {
  const tags = dmarcTags(record);
  const policy = tags?.get(parent ? 'sp' : 'p') ?? tags?.get('p');
  const valid = tags !== null && ['none', 'quarantine', 'reject'].includes(tags.get('p')?.toLowerCase() ?? '');
  const note = parent
    ? `${base.note} There is no record at ${base.name}: the one at _dmarc.${parent} applies to it (policy ${policy ?? 'none'}).`
    : base.note;
  if (!valid) {
    return {
      ...base,
      state: 'different',
      found: [record],
      note,
      problems: [{ severity: 'error', code: 'dmarc_invalid', message: `The DMARC record ${parent ? `at _dmarc.${parent} ` : ''}has no valid p= (none, quarantine or reject), so receivers ignore it.` }],
    };
  }
  const problems: Problem[] = tags.has('rua')
    ? []
    : [{ severity: 'warning', code: 'dmarc_no_reports', message: `The DMARC record has no rua=: nobody receives the aggregate reports that show which mail fails. Add rua=mailto:an address of yours.` }];
  return { ...base, state: 'present', value: parent ? base.value : record, found: [record], note, problems };
}

async function checkValue(need: ValueNeed, lookup: DnsLookup): Promise<CheckedRecord> {
  const base: CheckedRecord = {
    purpose: need.purpose,
    type: need.type,
    name: need.name,
    value: need.value,
    value_exact: need.match === null,
    state: 'missing',
    found: [],
    note: need.note,
    dns_lookups: null,
    problems: [],
    required_by: need.required_by,
  };
  const same = (found: string) => (need.match ? need.match.test(found.trim()) : dnsName(found.trim()) === dnsName(need.value));
  if (need.type === 'MX') {
    const answer = await lookup.mx(need.name);
    if (answer.failed) return { ...base, state: 'lookup_failed', problems: [lookupProblem(need.name, 'MX', answer.failed)] };
    const host = need.value.split(/\s+/).pop()!;
    const found = answer.records.map((r) => `${r.priority} ${r.exchange}`);
    const state = answer.records.some((r) => dnsName(r.exchange) === dnsName(host)) ? 'present' : found.length > 0 ? 'different' : 'missing';
    return { ...base, state, found };
  }
  if (need.type === 'CNAME') {
    const answer = await lookup.cname(need.name);
    if (answer.failed) return { ...base, state: 'lookup_failed', problems: [lookupProblem(need.name, 'CNAME', answer.failed)] };
    const state = answer.records.some(same) ? 'present' : answer.records.length > 0 ? 'different' : 'missing';
    return { ...base, state, found: answer.records };
  }
  const answer = await lookup.txt(need.name);
  if (answer.failed) return { ...base, state: 'lookup_failed', problems: [lookupProblem(need.name, 'TXT', answer.failed)] };
  const found = answer.records.filter(same);
  return { ...base, state: found.length > 0 ? 'present' : 'missing', found };
}

/** DNS allows nothing beside a CNAME (RFC 1034 §3.6.2). */
function markConflicts(records: CheckedRecord[]): void {
  for (const r of records) {
    const others = records.filter((o) => o !== r && o.name === r.name);
    if (others.length === 0 || !(r.type === 'CNAME' || others.some((o) => o.type === 'CNAME'))) continue;
    r.problems.push({
      severity: 'error',
      code: 'name_conflict',
      message: `${r.name} is needed as a CNAME and as another record, which DNS does not allow: give one of them another name (another DKIM selector, another bounce subdomain).`,
    });
  }
}

export async function checkRecords(domain: string, needs: Need[], notes: ProviderNote[], lookup: DnsLookup, opts: { projects: string[]; now: number }): Promise<DomainCheck> {
  const records = await Promise.all(
    needs.map((need) => {
      switch (need.kind) {
        case 'dkim':
          return checkDkim(need, lookup);
        case 'spf':
          return checkSpf(need, lookup);
        case 'dmarc':
          return checkDmarc(need, lookup);
        case 'value':
          return checkValue(need, lookup);
        default:
          return need satisfies never;
      }
    }),
  );
  markConflicts(records);
  const needsAction = records.some((r) => r.state === 'missing' || r.state === 'different' || r.problems.some((p) => p.severity === 'error' && p.code !== 'lookup_failed'));
  const status = needsAction ? 'action_needed' : records.some((r) => r.state === 'lookup_failed') ? 'incomplete' : 'ok';
  return { domain, checked_at: new Date(opts.now).toISOString(), projects: opts.projects, status, records, notes };
}
