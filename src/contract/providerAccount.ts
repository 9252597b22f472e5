/** A provider account as every layer reads it; settings and secrets are parsed once, when the row is loaded. */

export interface ProviderAccountSettings {
  host: string | null;
  port: number | null;
  user: string | null;
  tls: 'starttls' | 'implicit' | 'none' | null;
  endpoint: string | null;
  region: string | null;
  /** For APIs addressed per domain (provider-c: Mailgun). */
  domain?: string | null;
  label?: string | null;
  webhook_public_key?: string | null;
}

/** Needed in clear to authenticate to the provider; never printed. */
export interface ProviderAccountSecrets {
  pass?: string;
  api_key?: string;
  /** A signing key (Mailgun, Resend), or the token / basic-auth password in the feedback URL (Postmark, Brevo). */
  webhook_secret?: string;
}

/** Cached and shared between hand-offs and requests: nobody changes one. */
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
