import type { RecordPurpose, RequiredBy } from './needs.js';

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

export const DOMAIN_ITSELF: RequiredBy = { kind: 'domain', id: null, project_id: null, slug: null };

export function lookupProblem(name: string, type: string, failed: string): Problem {
  return {
    severity: 'error',
    code: 'lookup_failed',
    message: `The ${type} lookup of ${name} got no answer (${failed}): the record's state is not known; try again, or check dns.servers.`,
  };
}
