/** The configured servers (`dns.servers`, else the system's); answers cached for the one check, so a name asked twice is asked once. */
import { Resolver } from 'node:dns/promises';

/** `failed`: no answer (a timeout, SERVFAIL), so nothing is known. */
export interface Answer<T> {
  records: T[];
  failed: string | null;
}

export interface MxRecord {
  priority: number;
  exchange: string;
}

export interface DnsLookup {
  /** RFC 7208 §3.3, RFC 6376 §3.6.2.2. */
  txt(name: string): Promise<Answer<string>>;
  mx(name: string): Promise<Answer<MxRecord>>;
  cname(name: string): Promise<Answer<string>>;
}

export interface DnsSettings {
  servers: string[];
  timeout_ms: number;
  tries: number;
}

/** NXDOMAIN or no record of the type: an answer, and an empty one. */
const EMPTY = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME']);

export const dnsName = (name: string): string => name.toLowerCase().replace(/\.$/, '');

export function dnsLookup(settings: DnsSettings): DnsLookup {
  const resolver = new Resolver({ timeout: settings.timeout_ms, tries: settings.tries });
  if (settings.servers.length > 0) resolver.setServers(settings.servers);
  const cache = new Map<string, Promise<Answer<unknown>>>();
  function ask<T>(type: string, name: string, query: () => Promise<T[]>): Promise<Answer<T>> {
    const key = `${type} ${dnsName(name)}`;
    let answer = cache.get(key) as Promise<Answer<T>> | undefined;
    if (!answer) {
      answer = query().then(
        (records) => ({ records, failed: null }),
        (err: NodeJS.ErrnoException) =>
          EMPTY.has(err.code ?? '')
            ? { records: [], failed: null }
            : { records: [], failed: err.code ?? err.message },
      );
      cache.set(key, answer);
    }
    return answer;
  }
  return {
    txt: (name) =>
      ask('TXT', name, async () =>
        (await resolver.resolveTxt(name)).map((chunks) => chunks.join('')),
      ),
    mx: (name) =>
      ask('MX', name, async () =>
        (await resolver.resolveMx(name)).map((r) => ({
          priority: r.priority,
          exchange: dnsName(r.exchange),
        })),
      ),
    cname: (name) =>
      ask('CNAME', name, async () => (await resolver.resolveCname(name)).map(dnsName)),
  };
}
