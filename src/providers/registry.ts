/** Every provider of this build, from registry.gen.ts: nothing here names a provider (docs/architecture.md#providers). */
import type { Clock } from '../clock.js';
import type { ProviderAdapter } from './adapter.js';
import type { DeclaredProvider, DeclaredSlug, ProviderDns } from './declaration.js';
import type { FeedbackVerifier } from './feedback.js';
import { DECLARED_PROVIDERS } from './registry.gen.js';
import { type SmtpRelay, SmtpRelayAdapter } from './smtpRelay.js';

const BY_SLUG = new Map<string, { slug: DeclaredSlug; provider: DeclaredProvider }>(
  DECLARED_PROVIDERS.flatMap((provider) =>
    provider.slugs.map((slug) => [slug.slug, { slug, provider }] as const),
  ),
);

/** In the send API contract's order: the generic relay, then each provider's API slug and SMTP slug. */
export const DECLARED_SLUGS: readonly DeclaredSlug[] = DECLARED_PROVIDERS.flatMap((p) => p.slugs);

export function declaredSlug(slug: string): DeclaredSlug | undefined {
  return BY_SLUG.get(slug)?.slug;
}

export function smtpRelayOf(slug: string): SmtpRelay | undefined {
  const declared = declaredSlug(slug);
  return declared?.transport === 'smtp' ? declared.relay : undefined;
}

export function vendorOf(slug: string): string {
  return declaredSlug(slug)?.title ?? slug;
}

/** Its verifier checks the account's `webhook_secret` as the URL's last segment. */
export function feedbackUrlCarriesSecret(slug: string): boolean {
  return feedbackVerifierFor(slug)?.secretInUrl === true;
}

export function feedbackVerifierFor(slug: string): FeedbackVerifier | undefined {
  return BY_SLUG.get(slug)?.provider.feedback ?? undefined;
}

export function dnsNeedsOf(slug: string): { provider: string; dns: ProviderDns } | null {
  const found = BY_SLUG.get(slug);
  return found?.provider.dns ? { provider: found.provider.folder, dns: found.provider.dns } : null;
}

export interface AdapterSettings {
  clock: Clock;
  apiTimeoutMs: number;
  /** Connecting, the greeting, and each SMTP step. */
  smtpTimeoutMs: number;
  smtpPoolSize: number;
  /** `smtp.hostname`, else the host's name. */
  heloName: string;
}

export interface AdapterRegistry {
  adapterFor(slug: string): ProviderAdapter | undefined;
  close(): Promise<void>;
}

/** One per slug, each made on first use and kept. */
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
          ? new SmtpRelayAdapter(
              {
                clock,
                timeoutMs: settings.smtpTimeoutMs,
                poolSize: settings.smtpPoolSize,
                name: settings.heloName,
              },
              declared.relay,
            )
          : declared.adapter({ clock, timeoutMs: settings.apiTimeoutMs });
      adapters.set(slug, adapter);
      return adapter;
    },
    async close() {
      await Promise.all([...adapters.values()].map((a) => a.close()));
    },
  };
}
