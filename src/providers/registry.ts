import type { Clock } from '../clock.js';
import type { AdapterDeps, ProviderAdapter } from './adapter.js';
import { BrevoApiAdapter } from './brevoApi.js';
import type { FeedbackVerifier } from './feedback.js';
import { brevoVerifier } from './feedback/brevo.js';
import { mailgunVerifier } from './feedback/mailgun.js';
import { postmarkVerifier } from './feedback/postmark.js';
import { resendFeedback } from './feedback/resend.js';
import { sendgridFeedback } from './feedback/sendgrid.js';
import { sesFeedbackVerifier } from './feedback/ses.js';
import { MailgunApiAdapter } from './mailgunApi.js';
import { PostmarkApiAdapter } from './postmarkApi.js';
import { ResendApiAdapter } from './resendApi.js';
import { SendgridApiAdapter } from './sendgridApi.js';
import { SesApiAdapter } from './sesApi.js';
import { SmtpRelayAdapter } from './smtpRelay.js';

interface Provider {
  /** The vendor's own name, shown beside the slug. */
  vendor: string;
  /** Its feedback notifications prove the account by the `webhook_secret` in the URL (`…/<account>/<secret>`), not by a signature. */
  secretInFeedbackUrl?: boolean;
  /** The adapter of its `<provider>-api` slug, speaking the provider's public API. */
  api?: (deps: AdapterDeps) => ProviderAdapter;
  /**
   * Checks its feedback notifications the provider's way and normalizes them: one for all its
   * slugs (`provider-a-api` and `provider-a-smtp` get the same notifications). Without one the
   * provider has no feedback endpoint (404).
   */
  feedback?: FeedbackVerifier;
}

/** Every provider of this release, once. Every `provider-*-smtp` slug (and `smtp`) goes through the SMTP relay. */
const PROVIDERS: Record<string, Provider> = {
  'provider-a': { vendor: 'Amazon SES', api: (deps) => new SesApiAdapter(deps), feedback: sesFeedbackVerifier, secretInFeedbackUrl: true },
  'provider-b': { vendor: 'SendGrid', api: (deps) => new SendgridApiAdapter(deps), feedback: sendgridFeedback },
  'provider-c': { vendor: 'Mailgun', api: (deps) => new MailgunApiAdapter(deps), feedback: mailgunVerifier },
  'provider-d': { vendor: 'Resend', api: (deps) => new ResendApiAdapter(deps), feedback: resendFeedback },
  'provider-e': { vendor: 'Postmark', api: (deps) => new PostmarkApiAdapter(deps), feedback: postmarkVerifier, secretInFeedbackUrl: true },
  'provider-f': { vendor: 'Brevo', api: (deps) => new BrevoApiAdapter(deps), feedback: brevoVerifier, secretInFeedbackUrl: true },
  'provider-g': { vendor: 'Google Workspace (Gmail)' },
};

/** The provider a slug belongs to: `provider-a-api` and `provider-a-smtp` → `provider-a`. */
function providerOf(slug: string): Provider | undefined {
  const name = slug.replace(/-(api|smtp)$/, '');
  return Object.hasOwn(PROVIDERS, name) ? PROVIDERS[name] : undefined;
}

/** The vendor's name of a slug (`provider-e-api` → Postmark); `smtp` is any relay. */
export function vendorOf(slug: string): string {
  return providerOf(slug)?.vendor ?? 'SMTP relay';
}

/** Whether the feedback URL to give the provider carries the account's `webhook_secret` as its last segment. */
export function feedbackUrlCarriesSecret(slug: string): boolean {
  return providerOf(slug)?.secretInFeedbackUrl === true;
}

/** The feedback verifier for an account's slug, or undefined when its provider sends no feedback. */
export function feedbackVerifierFor(slug: string): FeedbackVerifier | undefined {
  return providerOf(slug)?.feedback;
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

/** The adapters, each made on first use and kept (the relay's pools, one API adapter per slug). */
export function createAdapterRegistry(settings: AdapterSettings): AdapterRegistry {
  const { clock } = settings;
  const relay = new SmtpRelayAdapter({ clock, timeoutMs: settings.smtpTimeoutMs, poolSize: settings.smtpPoolSize, name: settings.heloName });
  const apis = new Map<string, ProviderAdapter>();
  return {
    adapterFor(slug) {
      if (slug === 'smtp' || slug.endsWith('-smtp')) return relay;
      let adapter = apis.get(slug);
      const make = !adapter && slug.endsWith('-api') ? providerOf(slug)?.api : undefined;
      if (make) {
        adapter = make({ clock, timeoutMs: settings.apiTimeoutMs });
        apis.set(slug, adapter);
      }
      return adapter;
    },
    async close() {
      await Promise.all([relay.close(), ...[...apis.values()].map((a) => a.close())]);
    },
  };
}
