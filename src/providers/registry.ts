/**
 * Every provider of this build, read from registry.gen.ts: the providers' folders
 * (`<folder>/declaration.json` and `declaration.ts`) joined by `npm run gen:types`. Nothing here
 * names a provider: adding one is adding its folder (docs/architecture.md, "Providers").
 */
import type { Clock } from '../clock.js';
import type { ProviderAdapter } from './adapter.js';
import type { DeclaredProvider, DeclaredSlug, ProviderDns } from './declaration.js';
import type { FeedbackVerifier } from './feedback.js';
import { DECLARED_PROVIDERS } from './registry.gen.js';
import { SmtpRelayAdapter, type SmtpRelay } from './smtpRelay.js';

const BY_SLUG = new Map<string, { slug: DeclaredSlug; provider: DeclaredProvider }>(
  DECLARED_PROVIDERS.flatMap((provider) => provider.slugs.map((slug) => [slug.slug, { slug, provider }] as const)),
);

/** Every declared slug, in the send API contract's order: the generic relay, then each provider's API slug and SMTP slug. */
export const DECLARED_SLUGS: readonly DeclaredSlug[] = DECLARED_PROVIDERS.flatMap((p) => p.slugs);

/** A slug's declaration, or undefined when this build has no such slug. */
export function declaredSlug(slug: string): DeclaredSlug | undefined {
  return BY_SLUG.get(slug)?.slug;
}

/** The relay an SMTP slug declares (its defaults, option headers, message ids), or undefined for any other slug. */
export function smtpRelayOf(slug: string): SmtpRelay | undefined {
  const declared = declaredSlug(slug);
  return declared?.transport === 'smtp' ? declared.relay : undefined;
}

/** What the console shows beside a slug: its declared title ("Postmark API"). */
export function vendorOf(slug: string): string {
  return declaredSlug(slug)?.title ?? slug;
}

/** Whether the feedback URL to give the provider ends in the account's `webhook_secret` (its verifier checks it there). */
export function feedbackUrlCarriesSecret(slug: string): boolean {
  return feedbackVerifierFor(slug)?.secretInUrl === true;
}

/** The feedback verifier for an account's slug (its provider's, for all its slugs), or undefined when its provider sends no feedback. */
export function feedbackVerifierFor(slug: string): FeedbackVerifier | undefined {
  return BY_SLUG.get(slug)?.provider.feedback ?? undefined;
}

/** The DNS records a slug's provider needs on a sending domain (its declaration's `dns`), with the provider's folder; null: none known. */
export function dnsNeedsOf(slug: string): { provider: string; dns: ProviderDns } | null {
  const found = BY_SLUG.get(slug);
  return found?.provider.dns ? { provider: found.provider.folder, dns: found.provider.dns } : null;
}

/** What the adapters are built with: the parts of `delivery` and `smtp` they read. */
export interface AdapterSettings {
  clock: Clock;
  /** `delivery.api_timeout_ms`: one request to a provider API. */
  apiTimeoutMs: number;
  /** `delivery.smtp_timeout_ms`: connecting, the greeting, and each SMTP step. */
  smtpTimeoutMs: number;
  /** `delivery.smtp_pool_size`: connections per relay account. */
  smtpPoolSize: number;
  /** The name the relay gives in EHLO (`smtp.hostname`, else the host's name). */
  heloName: string;
}

export interface AdapterRegistry {
  adapterFor(slug: string): ProviderAdapter | undefined;
  close(): Promise<void>;
}

/** The adapters, one per slug, each made on first use and kept (a relay slug's pools, an API's adapter). */
export function createAdapterRegistry(settings: AdapterSettings): AdapterRegistry {
  const { clock } = settings;
  const adapters = new Map<string, ProviderAdapter>();
  return {
    adapterFor(slug) {
      let adapter = adapters.get(slug);
      if (adapter) return adapter;
      const declared = declaredSlug(slug);
      if (!declared) return undefined;
      adapter =
        declared.transport === 'smtp'
          ? new SmtpRelayAdapter({ clock, timeoutMs: settings.smtpTimeoutMs, poolSize: settings.smtpPoolSize, name: settings.heloName }, declared.relay)
          : declared.adapter({ clock, timeoutMs: settings.apiTimeoutMs });
      adapters.set(slug, adapter);
      return adapter;
    },
    async close() {
      await Promise.all([...adapters.values()].map((a) => a.close()));
    },
  };
}
