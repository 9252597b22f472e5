/**
 * A provider is one folder, `src/providers/<folder>/` (docs/architecture.md, "Providers"):
 *
 * - `declaration.json`: its slugs (an API slug and/or an SMTP slug), each slug's title and the
 *   account fields it takes (picked from accountFields.json, with its own titles and
 *   descriptions), and the provider_options its API slug accepts. Data: the generator reads it.
 * - `declaration.ts`: `export const provider = {…} satisfies ProviderCode`: what each slug does
 *   (an API slug's adapter and connection check, an SMTP slug's relay) and the feedback verifier
 *   all its slugs share; `adapter.ts`, `feedback.ts` and `connectionCheck.ts` beside it.
 *
 * `npm run gen:types` (scripts/generate-providers.mjs) joins the two into registry.gen.ts, and
 * derives the OpenAPI enums, ProviderAttach and the web console's attach form from the data.
 */
import type { AccountSchema } from './accountFields.js';
import type { AdapterDeps, ProviderAdapter } from './adapter.js';
import type { ApiConnectionCheck } from './connectionCheck.js';
import type { FeedbackVerifier } from './feedback.js';
import type { SmtpRelay } from './smtpRelay.js';

/** An API slug's code: its adapter (one per slug, made on first use) and the read-only call that checks an account. */
export interface ApiCode {
  adapter: (deps: AdapterDeps) => ProviderAdapter;
  /** None: the account cannot be checked without sending (`checkable: false`). */
  connectionCheck?: ApiConnectionCheck;
}

/** What a provider's declaration.ts exports as `provider`. */
export interface ProviderCode {
  api?: ApiCode;
  smtp?: SmtpRelay;
  /** Checks the provider's feedback notifications, for all its slugs. None: no feedback endpoint (404). */
  feedback?: FeedbackVerifier;
}

/** A slug as its declaration.json gives it (the generator joins in the account fields' schemas). */
export interface SlugData {
  slug: string;
  title: string;
  account: AccountSchema;
}

export type DeclaredSlug = (SlugData & ApiCode & { transport: 'api' }) | (SlugData & { transport: 'smtp'; relay: SmtpRelay });

export interface DeclaredProvider {
  folder: string;
  /** The API slug first, then the SMTP slug. */
  slugs: DeclaredSlug[];
  feedback: FeedbackVerifier | null;
}

/** The data a provider's code needs: a slug for each part it implements, and none other. */
type SlugDataOf<C extends ProviderCode> = { [K in keyof C & ('api' | 'smtp')]-?: SlugData };

/**
 * A provider's code joined with its declaration.json's slugs (registry.gen.ts calls it): a slug
 * the JSON declares without code, or code without a slug, does not compile.
 */
export function declareProvider<C extends ProviderCode>(folder: string, code: C, data: SlugDataOf<C>): DeclaredProvider;
export function declareProvider(folder: string, code: ProviderCode, data: { api?: SlugData; smtp?: SlugData }): DeclaredProvider {
  const slugs: DeclaredSlug[] = [];
  if (code.api && data.api) slugs.push({ transport: 'api', ...data.api, ...code.api });
  if (code.smtp && data.smtp) slugs.push({ transport: 'smtp', ...data.smtp, relay: code.smtp });
  return { folder, slugs, feedback: code.feedback ?? null };
}
