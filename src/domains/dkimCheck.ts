import { type CheckedRecord, lookupProblem, type Problem } from './checkedRecord.js';
import type { DnsLookup } from './lookup.js';
import { type DkimNeed, dkimPublicKey } from './needs.js';

function longTxtNote(value: string): string {
  return value.length > 255
    ? ` The value is ${value.length} characters: most DNS hosts split it into 255-character strings themselves; in a zone file, write it as several quoted strings on one record.`
    : '';
}

export async function checkDkim(need: DkimNeed, lookup: DnsLookup): Promise<CheckedRecord> {
  const answer = await lookup.txt(need.name);
  const parent =
    need.keyDomain !== need.signsFor
      ? ` It signs mail from ${need.signsFor} too: the project has no key of that domain's own, and d=${need.keyDomain} aligns with it.`
      : '';
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
  if (answer.failed)
    return {
      ...base,
      state: 'lookup_failed',
      problems: [lookupProblem(need.name, 'TXT', answer.failed)],
    };
  if (answer.records.length === 0) return base;
  const keys = answer.records.map(dkimPublicKey);
  if (keys.includes(need.publicKey)) {
    const problems: Problem[] =
      answer.records.length > 1
        ? [
            {
              severity: 'warning',
              code: 'dkim_multiple_records',
              message: `${need.name} has ${answer.records.length} TXT records: a receiver may read another one and fail the signature. Keep only this key's.`,
            },
          ]
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
