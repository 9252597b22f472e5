import type { IncomingHttpHeaders } from 'node:http';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { ProviderAccount } from '../contract/providerAccount.js';
import type { Logger } from '../log.js';

export interface FeedbackRequest {
  headers: IncomingHttpHeaders;
  /** The exact bytes received: signatures are computed over them. */
  rawBody: Buffer;
  /** The path segment after the account id (a secret token), percent-decoded once. */
  token: string | null;
  url: string;
}

/** A provider's report, normalized (docs/delivery.md#provider-feedback). */
export type FeedbackKind = 'delivered' | 'hard_bounce' | 'soft_bounce' | 'complaint' | 'failed';

export interface FeedbackItem {
  /** Unique per item at this provider: the same item twice is applied once. */
  receiptKey: string;
  kind: FeedbackKind;
  providerMessageId: string | null;
  /** Our `m.` id when the provider echoes it back; tried when the provider id matches nothing. */
  messageId: string | null;
  recipient: string;
  occurredAt: number;
  detail: { type?: string; subtype?: string; code?: string; reply?: string };
}

export type FeedbackVerdict =
  | {
      ok: true;
      items: FeedbackItem[];
      note?: string;
    }
  | {
      ok: false;
      code:
        | 'feedback:unauthenticated'
        | 'feedback:stale'
        | 'feedback:replayed'
        | 'feedback:malformed';
      reason: string;
    };

export interface FeedbackContext {
  clock: Clock;
  logger: Logger;
  config: Pick<PosternConfig['feedback'], 'tolerance_seconds' | 'sns_certificate_dir'>;
  /** False if `key` was seen before (a replay). Durable: a restart does not forget. */
  rememberOnce(account: ProviderAccount, key: string): Promise<boolean>;
}

/** One per provider: all its slugs get the same notifications. */
export interface FeedbackVerifier {
  /** The provider proves itself by the account's `webhook_secret` as the URL's last segment, not by a signature. */
  secretInUrl?: boolean;
  verify(
    req: FeedbackRequest,
    account: ProviderAccount,
    ctx: FeedbackContext,
  ): Promise<FeedbackVerdict>;
}

export function headerOf(headers: IncomingHttpHeaders, name: string): string | null {
  const v = headers[name.toLowerCase()];
  return (Array.isArray(v) ? v[0] : v) ?? null;
}

/** Null when a signed timestamp is within `tolerance_seconds` of now, else why not. */
export function staleness(timestamp: string, ctx: FeedbackContext): string | null {
  if (!/^\d{1,12}$/.test(timestamp))
    return `timestamp "${timestamp.slice(0, 20)}" is not Unix seconds`;
  const skew = Math.abs(ctx.clock.now() / 1000 - Number(timestamp));
  return skew > ctx.config.tolerance_seconds
    ? `timestamp is ${Math.round(skew)} s away from now (tolerance ${ctx.config.tolerance_seconds} s)`
    : null;
}
