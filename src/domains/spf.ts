/** SPF records (RFC 7208) as a domain check reads them. */
import { type DnsLookup, dnsName } from './lookup.js';

/** RFC 7208 §4.6.4: a receiver stops after 10 terms that cause a lookup, and SPF fails (permerror). */
export const SPF_LOOKUP_LIMIT = 10;
/** Past the limit the count only matters as "too many". */
const MAX_DEPTH = 10;

/** RFC 7208 §4.5. */
export const isSpf = (txt: string): boolean => /^v=spf1(\s|$)/i.test(txt.trim());

export const spfTerms = (record: string): string[] => record.trim().split(/\s+/).slice(1);

export function spfIncludes(record: string): string[] {
  return spfTerms(record).flatMap((t) => {
    const m = /^[+?~-]?include:(.+)$/i.exec(t);
    return m ? [dnsName(m[1])] : [];
  });
}

/** Before its `all` (or `redirect=`), or at its end. */
export function withIncludes(record: string, includes: string[]): string {
  const terms = spfTerms(record);
  const at = terms.findIndex((t) => /^[+?~-]?all$/i.test(t) || /^redirect=/i.test(t));
  const added = includes.map((d) => `include:${d}`);
  if (at < 0) terms.push(...added);
  else terms.splice(at, 0, ...added);
  return ['v=spf1', ...terms].join(' ');
}

/** Receivers refuse a name with two SPF records: one record that says what they said, with a single `all` at the end. */
export function mergeSpf(records: string[]): string {
  const terms: string[] = [];
  let last: string | null = null;
  for (const record of records) {
    for (const term of spfTerms(record)) {
      if (/^[+?~-]?all$/i.test(term) || /^redirect=/i.test(term)) {
        last ??= term;
        continue;
      }
      if (!terms.some((t) => t.toLowerCase() === term.toLowerCase())) terms.push(term);
    }
  }
  return ['v=spf1', ...terms, ...(last ? [last] : [])].join(' ');
}

/** `~all`: mail from anywhere else soft-fails. */
export const newSpf = (includes: string[]): string =>
  ['v=spf1', ...includes.map((d) => `include:${d}`), '~all'].join(' ');

function lookupTarget(term: string): { counts: boolean; follow: string | null } {
  const t = term.replace(/^[+?~-]/, '');
  const include = /^include:(.+)$/i.exec(t);
  if (include) return { counts: true, follow: include[1] };
  const redirect = /^redirect=(.+)$/i.exec(t);
  if (redirect) return { counts: true, follow: redirect[1] };
  return { counts: /^(a|mx|ptr)([:/].*)?$/i.test(t) || /^exists:/i.test(t), follow: null };
}

/** As a receiver counts them (an include repeated in two branches counts twice); a macro target counts one and is not followed. */
export async function spfLookups(
  record: string,
  lookup: DnsLookup,
  depth = 0,
  ancestors: readonly string[] = [],
): Promise<number> {
  let count = 0;
  for (const term of spfTerms(record)) {
    const { counts, follow } = lookupTarget(term);
    if (!counts) continue;
    count++;
    if (count > SPF_LOOKUP_LIMIT) return count;
    if (follow === null || follow.includes('%') || depth >= MAX_DEPTH) continue;
    const target = dnsName(follow);
    if (ancestors.includes(target)) continue;
    const nested = (await lookup.txt(target)).records.filter(isSpf);
    if (nested.length === 1)
      count += await spfLookups(nested[0], lookup, depth + 1, [...ancestors, target]);
    if (count > SPF_LOOKUP_LIMIT) return count;
  }
  return count;
}
