/** A sending domain's needed records looked up in DNS and judged: the console document's DomainCheck. */
import { type CheckedRecord, lookupProblem } from './checkedRecord.js';
import { checkDkim } from './dkimCheck.js';
import { checkDmarc } from './dmarcCheck.js';
import type { DnsLookup } from './lookup.js';
import { dnsName } from './lookup.js';
import type { Need, ProviderNote, ValueNeed } from './needs.js';
import { checkSpf } from './spfCheck.js';

export interface DomainCheck {
  domain: string;
  checked_at: string;
  projects: string[];
  status: 'ok' | 'action_needed' | 'incomplete';
  records: CheckedRecord[];
  notes: ProviderNote[];
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
  const same = (found: string) =>
    need.match ? need.match.test(found.trim()) : dnsName(found.trim()) === dnsName(need.value);
  if (need.type === 'MX') {
    const answer = await lookup.mx(need.name);
    if (answer.failed)
      return {
        ...base,
        state: 'lookup_failed',
        problems: [lookupProblem(need.name, 'MX', answer.failed)],
      };
    const host = need.value.split(/\s+/).pop()!;
    const found = answer.records.map((r) => `${r.priority} ${r.exchange}`);
    const state = answer.records.some((r) => dnsName(r.exchange) === dnsName(host))
      ? 'present'
      : found.length > 0
        ? 'different'
        : 'missing';
    return { ...base, state, found };
  }
  if (need.type === 'CNAME') {
    const answer = await lookup.cname(need.name);
    if (answer.failed)
      return {
        ...base,
        state: 'lookup_failed',
        problems: [lookupProblem(need.name, 'CNAME', answer.failed)],
      };
    const state = answer.records.some(same)
      ? 'present'
      : answer.records.length > 0
        ? 'different'
        : 'missing';
    return { ...base, state, found: answer.records };
  }
  const answer = await lookup.txt(need.name);
  if (answer.failed)
    return {
      ...base,
      state: 'lookup_failed',
      problems: [lookupProblem(need.name, 'TXT', answer.failed)],
    };
  const found = answer.records.filter(same);
  return { ...base, state: found.length > 0 ? 'present' : 'missing', found };
}

/** DNS allows nothing beside a CNAME (RFC 1034 §3.6.2). */
function markConflicts(records: CheckedRecord[]): void {
  for (const r of records) {
    const others = records.filter((o) => o !== r && o.name === r.name);
    if (others.length === 0 || !(r.type === 'CNAME' || others.some((o) => o.type === 'CNAME')))
      continue;
    r.problems.push({
      severity: 'error',
      code: 'name_conflict',
      message: `${r.name} is needed as a CNAME and as another record, which DNS does not allow: give one of them another name (another DKIM selector, another bounce subdomain).`,
    });
  }
}

export async function checkRecords(
  domain: string,
  needs: Need[],
  notes: ProviderNote[],
  lookup: DnsLookup,
  opts: { projects: string[]; now: number },
): Promise<DomainCheck> {
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
  const needsAction = records.some(
    (r) =>
      r.state === 'missing' ||
      r.state === 'different' ||
      r.problems.some((p) => p.severity === 'error' && p.code !== 'lookup_failed'),
  );
  const status = needsAction
    ? 'action_needed'
    : records.some((r) => r.state === 'lookup_failed')
      ? 'incomplete'
      : 'ok';
  return {
    domain,
    checked_at: new Date(opts.now).toISOString(),
    projects: opts.projects,
    status,
    records,
    notes,
  };
}
