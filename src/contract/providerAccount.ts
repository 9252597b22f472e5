/**
 * A provider account as every layer reads it: the operator attaches one, the store keeps it
 * (settings and secrets as JSON columns, parsed once when the row is loaded), delivery routes
 * over them, and each provider's adapter and feedback verifier reads its settings and secrets.
 */

/** What an account is configured with (the `settings` column). */
export interface ProviderAccountSettings {
  host: string | null;
  port: number | null;
  user: string | null;
  tls: 'starttls' | 'implicit' | 'none' | null;
  endpoint: string | null;
  region: string | null;
  /** The sending domain, for APIs addressed per domain (provider-c: Mailgun). */
  domain?: string | null;
  /** The operator's name for the account ("transactional, EU"); null or absent: none. */
  label?: string | null;
  /** The provider's public key that signs its feedback notifications (provider-b: SendGrid's ECDSA key). */
  webhook_public_key?: string | null;
}

/** The `secrets` column: needed in clear to authenticate to the provider; never printed. */
export interface ProviderAccountSecrets {
  pass?: string;
  api_key?: string;
  /** Verifies feedback notifications: a signing key (Mailgun, Resend), or the token / basic-auth password in the feedback URL (Postmark, Brevo). */
  webhook_secret?: string;
}

/**
 * One attached (or detached) account. Loaded accounts are cached and shared between hand-offs
 * and requests: nobody changes one.
 */
export interface ProviderAccount {
  readonly id: string;
  readonly project_id: string;
  readonly slug: string;
  readonly settings: Readonly<ProviderAccountSettings>;
  readonly secrets: Readonly<ProviderAccountSecrets>;
  readonly priority: number;
  readonly free_quota: number | null;
  readonly created_at: number;
  readonly detached_at: number | null;
}
