import {
  type CheckedRecord,
  DOMAIN_ITSELF,
  lookupProblem,
  type Problem,
  type RecordState,
} from './checkedRecord.js';
import type { DnsLookup } from './lookup.js';
import { dnsName } from './lookup.js';
import type { SpfNeed } from './needs.js';
import {
  isSpf,
  mergeSpf,
  newSpf,
  SPF_LOOKUP_LIMIT,
  spfIncludes,
  spfLookups,
  withIncludes,
} from './spf.js';

function includeList(need: SpfNeed): string {
  return need.includes
    .map(
      (i) =>
        `include:${i.include} (${[...new Set(i.required_by.map((r) => r.slug ?? r.kind))].join(', ')})`,
    )
    .join(', ');
}

export async function checkSpf(need: SpfNeed, lookup: DnsLookup): Promise<CheckedRecord> {
  const answer = await lookup.txt(need.name);
  const found = answer.records.filter(isSpf);
  const needed = need.includes;
  const note =
    needed.length > 0
      ? `SPF: the servers allowed to send mail whose bounce address is at ${need.name}. Needed here: ${includeList(need)}.`
      : `SPF: the servers allowed to send mail whose bounce address is at ${need.name}. No attached provider needs an include here (theirs go on their own bounce domains); if other servers send mail as ${need.name} (your own mail service), add their mechanisms before ~all.`;
  const requiredBy =
    needed.length > 0
      ? needed
          .flatMap((i) => i.required_by)
          .filter((r, i, all) => all.findIndex((o) => o.kind === r.kind && o.id === r.id) === i)
      : [DOMAIN_ITSELF];
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
    problems.push({
      severity: 'warning',
      code: 'spf_allows_all',
      message: `The record ends in +all: every server on the internet may send as ${need.name}. Use ~all or -all.`,
    });
  }
  return {
    purpose: 'spf',
    type: 'TXT',
    name: need.name,
    value,
    value_exact: true,
    state,
    found,
    note,
    dns_lookups: Math.min(lookups, SPF_LOOKUP_LIMIT + 1),
    problems,
    required_by: requiredBy,
  };
}
