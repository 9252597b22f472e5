import { type CheckedRecord, DOMAIN_ITSELF, lookupProblem, type Problem } from './checkedRecord.js';
import type { DnsLookup } from './lookup.js';
import type { DmarcNeed } from './needs.js';

/** RFC 7489 §6.4; null unless it starts with v=DMARC1. */
function dmarcTags(record: string): Map<string, string> | null {
  const tags = new Map<string, string>();
  const parts = record
    .split(';')
    .map((p) => p.trim())
    .filter(Boolean);
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

export async function checkDmarc(need: DmarcNeed, lookup: DnsLookup): Promise<CheckedRecord> {
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
  if (answer.failed)
    return {
      ...base,
      state: 'lookup_failed',
      problems: [lookupProblem(need.name, 'TXT', answer.failed)],
    };
  const found = answer.records.filter(isDmarc);
  if (found.length > 1) {
    return {
      ...base,
      state: 'different',
      found,
      problems: [
        {
          severity: 'error',
          code: 'dmarc_multiple_records',
          message: `${need.name} has ${found.length} DMARC records: receivers then apply none (RFC 7489 §6.6.3). Keep one.`,
        },
      ],
    };
  }
  if (found.length === 1) return judgeDmarc(base, found[0], null);
  for (const parent of dmarcParents(need.domain)) {
    const inherited = await lookup.txt(`_dmarc.${parent}`);
    if (inherited.failed)
      return {
        ...base,
        state: 'lookup_failed',
        problems: [lookupProblem(`_dmarc.${parent}`, 'TXT', inherited.failed)],
      };
    const records = inherited.records.filter(isDmarc);
    if (records.length === 1) return judgeDmarc(base, records[0], parent);
    if (records.length > 1) break;
  }
  return base;
}

function judgeDmarc(base: CheckedRecord, record: string, parent: string | null): CheckedRecord {
  const tags = dmarcTags(record);
  const policy = tags?.get(parent ? 'sp' : 'p') ?? tags?.get('p');
  const valid =
    tags !== null && ['none', 'quarantine', 'reject'].includes(tags.get('p')?.toLowerCase() ?? '');
  const note = parent
    ? `${base.note} There is no record at ${base.name}: the one at _dmarc.${parent} applies to it (policy ${policy ?? 'none'}).`
    : base.note;
  if (!valid) {
    return {
      ...base,
      state: 'different',
      found: [record],
      note,
      problems: [
        {
          severity: 'error',
          code: 'dmarc_invalid',
          message: `The DMARC record ${parent ? `at _dmarc.${parent} ` : ''}has no valid p= (none, quarantine or reject), so receivers ignore it.`,
        },
      ],
    };
  }
  const problems: Problem[] = tags.has('rua')
    ? []
    : [
        {
          severity: 'warning',
          code: 'dmarc_no_reports',
          message: `The DMARC record has no rua=: nobody receives the aggregate reports that show which mail fails. Add rua=mailto:an address of yours.`,
        },
      ];
  return {
    ...base,
    state: 'present',
    value: parent ? base.value : record,
    found: [record],
    note,
    problems,
  };
}
