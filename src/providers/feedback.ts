import type { IncomingHttpHeaders } from 'node:http';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { ProviderAccount } from '../contract/providerAccount.js';
import type { Logger } from '../log.js';

/** A notification as it arrived at `POST /v1/feedback/<account id>[/<token>]`. */
export interface FeedbackRequest {
  headers: IncomingHttpHeaders;
  /** The exact bytes received: signatures are computed over them. */
  rawBody: Buffer;
  /** The path segment after the account id (a secret token in the URL), if any, percent-decoded once (by the router). */
  token: string | null;
  /** The full request URL as the provider called it (path and query). */
  url: string;
}

/**
 * What a provider reported, normalized:
 * - `delivered`: the recipient's server took the message → `mail.delivered`;
 * - `hard_bounce`: permanent for that address → `mail.bounced` + suppression (hard_bounce);
 * - `soft_bounce`: temporary; recorded on the message, no event;
 * - `complaint`: the recipient marked it spam → `mail.complained` + suppression (complaint);
 * - `failed`: the provider itself rejected or dropped it → `mail.failed`.
 */
export type FeedbackKind = 'delivered' | 'hard_bounce' | 'soft_bounce' | 'complaint' | 'failed';

export interface FeedbackItem {
  /** Unique per notification item at this provider (its event id, or a digest of the item): the same item twice is applied once. */
  receiptKey: string;
  kind: FeedbackKind;
  /** The id the provider answered at hand-off, in the form the adapter stored it. */
  providerMessageId: string | null;
  /** Our `m.` id when the provider echoes it back (custom args, metadata, tags); tried when the provider id matches nothing. */
  messageId: string | null;
  recipient: string;
  occurredAt: number;
  /** The provider's own words: bounce type and subtype, diagnostic code, SMTP reply. */
  detail: { type?: string; subtype?: string; code?: string; reply?: string };
}

export type FeedbackVerdict =
  | {
      ok: true;
      items: FeedbackItem[];
      /** Notifications that are not feedback (opens, clicks, subscription handshakes) acknowledged with a note. */
      note?: string;
    }
  | { ok: false; code: 'feedback:unauthenticated' | 'feedback:stale' | 'feedback:replayed' | 'feedback:malformed'; reason: string };

export interface FeedbackContext {
  clock: Clock;
  logger: Logger;
  config: Pick<PosternConfig['feedback'], 'tolerance_seconds' | 'sns_certificate_dir'>;
  /**
   * Records `key` for this account if it was never seen; false if it was (a replayed token).
   * Durable: a restart does not forget.
   */
  rememberOnce(account: ProviderAccount, key: string): Promise<boolean>;
}

/** One per provider (all its slugs: `provider-a-api` and `provider-a-smtp` get the same notifications). */
export interface FeedbackVerifier {
  /** The provider proves itself by the account's `webhook_secret` as the feedback URL's last segment (not by a signature): the URL to give it carries the secret. */
  secretInUrl?: boolean;
  verify(req: FeedbackRequest, account: ProviderAccount, ctx: FeedbackContext): Promise<FeedbackVerdict>;
}

/** A request header of a notification as one string (the first, if repeated). */
export function headerOf(headers: IncomingHttpHeaders, name: string): string | null {
  const v = headers[name.toLowerCase()];
  return (Array.isArray(v) ? v[0] : v) ?? null;
}

/** Null when a signed timestamp (Unix seconds) is within `tolerance_seconds` of now, else why not. */
export function staleness(timestamp: string, ctx: FeedbackContext): string | null {
  if (!/^\d{1,12}$/.test(timestamp)) return `timestamp "${timestamp.slice(0, 20)}" is not Unix seconds`;
  const skew = Math.abs(ctx.clock.now() / 1000 - Number(timestamp));
  return skew > ctx.config.tolerance_seconds ? `timestamp is ${Math.round(skew)} s away from now (tolerance ${ctx.config.tolerance_seconds} s)` : null;
}
