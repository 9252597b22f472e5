/** A provider is one folder, `src/providers/<folder>/`, with declaration.json and declaration.ts (docs/architecture.md#providers). */
import type { AccountSchema } from './accountFields.js';
import type { AdapterDeps, ProviderAdapter } from './adapter.js';
import type { ApiConnectionCheck } from './connectionCheck.js';
import type { FeedbackVerifier } from './feedback.js';
import type { SmtpRelay } from './smtpRelay.js';

export interface ApiCode {
  adapter: (deps: AdapterDeps) => ProviderAdapter;
  /** None: the account cannot be checked without sending (`checkable: false`). */
  connectionCheck?: ApiConnectionCheck;
}

export interface ProviderCode {
  api?: ApiCode;
  smtp?: SmtpRelay;
  /** None: no feedback endpoint (404). */
  feedback?: FeedbackVerifier;
}

export interface SlugData {
  slug: string;
  title: string;
  account: AccountSchema;
}

export type DeclaredSlug =
  | (SlugData & ApiCode & { transport: 'api' })
  | (SlugData & { transport: 'smtp'; relay: SmtpRelay });

/** `@` the sending domain, `{return_path}` the provider's bounce domain, or labels under the sending domain. */
export type DnsPlace = string;

export interface ProviderDnsRecord {
  purpose: 'return_path' | 'verification' | 'dkim';
  type: 'MX' | 'CNAME' | 'TXT';
  at: DnsPlace;
  /** `{region}`, `{domain}` filled in; with `match`, a template of what the provider shows. */
  value: string;
  /** The value is issued per account: a published value matching this (case-insensitive, whole) is the one. */
  match?: string;
  not_at_apex?: boolean;
  note: string;
}

export interface ProviderDns {
  documentation: string;
  region?: { default: string; as?: Record<string, string> };
  return_path?: { default?: DnsPlace; account_field?: 'domain' };
  spf?: { at: DnsPlace; include: string; also_accepted?: string[] }[];
  records?: ProviderDnsRecord[];
  notes?: string[];
}

export interface DeclaredProvider {
  folder: string;
  slugs: DeclaredSlug[];
  feedback: FeedbackVerifier | null;
  /** None: no record it needs is known (a relay of any host). */
  dns: ProviderDns | null;
}

type SlugDataOf<C extends ProviderCode> = { [K in keyof C & ('api' | 'smtp')]-?: SlugData };

/** A slug the JSON declares without code, or code without a slug, does not compile. */
export function declareProvider<C extends ProviderCode>(
  folder: string,
  code: C,
  data: SlugDataOf<C>,
  dns: ProviderDns | null,
): DeclaredProvider;
export function declareProvider(
  folder: string,
  code: ProviderCode,
  data: { api?: SlugData; smtp?: SlugData },
  dns: ProviderDns | null,
): DeclaredProvider {
  const slugs: DeclaredSlug[] = [];
  if (code.api && data.api) slugs.push({ transport: 'api', ...data.api, ...code.api });
  if (code.smtp && data.smtp) slugs.push({ transport: 'smtp', ...data.smtp, relay: code.smtp });
  return { folder, slugs, feedback: code.feedback ?? null, dns };
}
