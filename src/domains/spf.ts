/**
 * SPF records (RFC 7208) as a domain check reads them: which TXT records are SPF, the
 * `include:` terms a record has, the record with the includes it lacks added, and how many DNS
 * lookups it costs a receiver (the limit is 10, counted through nested includes and redirects).
 */
import { dnsName, type DnsLookup } from './lookup.js';

/** RFC 7208 §4.6.4: a receiver stops after 10 terms that cause a lookup, and SPF fails (permerror). */
export const SPF_LOOKUP_LIMIT = 10;
/** How deep nested includes are followed to count lookups (past the limit, the count only matters as "too many"). */
const MAX_DEPTH = 10;

/** A TXT record that is an SPF record: `v=spf1` then a space or nothing (RFC 7208 §4.5). */
export const isSpf = (txt: string): boolean => /^v=spf1(\s|$)/i.test(txt.trim());

/** The terms after `v=spf1`. */
export const spfTerms = (record: string): string[] => record.trim().split(/\s+/).slice(1);

/** The domains a record includes directly (`include:`, any qualifier), lower case. */
export function spfIncludes(record: string): string[] {
  return spfTerms(record).flatMap((t) => {
    const m = /^[+?~-]?include:(.+)$/i.exec(t);
    return m ? [dnsName(m[1])] : [];
  });
}

/** The record with `include:` terms added before its `all` (or `redirect=`), or at its end: the other terms as they are. */
export function withIncludes(record: string, includes: string[]): string {
  const terms = spfTerms(record);
  const at = terms.findIndex((t) => /^[+?~-]?all$/i.test(t) || /^redirect=/i.test(t));
  const added = includes.map((d) => `include:${d}`);
  if (at < 0) terms.push(...added);
  else terms.splice(at, 0, ...added);
  return ['v=spf1', ...terms].join(' ');
}

/**
 * One record that says what several said (receivers refuse a name with two SPF records): the
 * first record's terms, then each other record's terms not already there, with a single `all`
 * (the first record's) or `redirect=` at the end.
 */
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

/** A new record: the includes, and `~all` (mail from anywhere else soft-fails). */
export const newSpf = (includes: string[]): string => ['v=spf1', ...includes.map((d) => `include:${d}`), '~all'].join(' ');

/** A term that makes a receiver ask DNS (RFC 7208 §4.6.4): include, a, mx, ptr, exists, redirect. */
function lookupTarget(term: string): { counts: boolean; follow: string | null } {
  const t = term.replace(/^[+?~-]/, '');
  const include = /^include:(.+)$/i.exec(t);
  if (include) return { counts: true, follow: include[1] };
  const redirect = /^redirect=(.+)$/i.exec(t);
  if (redirect) return { counts: true, follow: redirect[1] };
  return { counts: /^(a|mx|ptr)([:/].*)?$/i.test(t) || /^exists:/i.test(t), follow: null };
}

/**
 * The DNS lookups a receiver makes to evaluate `record`, nested includes and redirects counted
 * (each included domain's SPF record asked once per check; an include repeated in two branches
 * counts twice, as a receiver evaluates it twice). A target with a macro (`%{…}`) counts one and
 * is not followed, nor is a domain that includes itself. Past the limit, counting stops at the
 * limit + 1.
 */
export async function spfLookups(record: string, lookup: DnsLookup, depth = 0, ancestors: readonly string[] = []): Promise<number> {
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
    if (nested.length === 1) count += await spfLookups(nested[0], lookup, depth + 1, [...ancestors, target]);
    if (count > SPF_LOOKUP_LIMIT) return count;
  }
  return count;
}
