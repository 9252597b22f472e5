import { createHash, timingSafeEqual } from 'node:crypto';
import type { ProviderAccount } from '../contract/providerAccount.js';
import { type FeedbackRequest, type FeedbackVerdict, headerOf } from './feedback.js';

/** How a provider that does not sign its notifications (Postmark, Brevo) presents the account's `webhook_secret`. */
export type UrlSecretScheme = 'token' | 'basic' | 'bearer';

/** Digests of equal length: the time does not depend on where they differ. */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

export function webhookSecretOf({ secrets }: ProviderAccount): string | null {
  return typeof secrets.webhook_secret === 'string' && secrets.webhook_secret !== ''
    ? secrets.webhook_secret
    : null;
}

function presented(
  req: FeedbackRequest,
  schemes: UrlSecretScheme[],
): { scheme: UrlSecretScheme; value: string }[] {
  const out: { scheme: UrlSecretScheme; value: string }[] = [];
  // Decoded once by the router: decoding again would take `%2541` for `A`, a second spelling of the secret.
  if (schemes.includes('token') && req.token !== null)
    out.push({ scheme: 'token', value: req.token });
  const authorization = headerOf(req.headers, 'authorization')?.trim() ?? '';
  const [kind, ...rest] = authorization.split(/\s+/);
  const credential = rest.join(' ');
  if (schemes.includes('basic') && /^basic$/i.test(kind ?? '') && credential) {
    const decoded = Buffer.from(credential, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    out.push({ scheme: 'basic', value: colon >= 0 ? decoded.slice(colon + 1) : '' });
  }
  if (schemes.includes('bearer') && /^bearer$/i.test(kind ?? '') && credential)
    out.push({ scheme: 'bearer', value: credential });
  return out;
}

/** Every credential presented must match (a right token beside a wrong password is refused). */
export function checkUrlSecret(
  req: FeedbackRequest,
  account: ProviderAccount,
  schemes: UrlSecretScheme[],
): Extract<FeedbackVerdict, { ok: false }> | null {
  const secret = webhookSecretOf(account);
  if (!secret)
    return {
      ok: false,
      code: 'feedback:unauthenticated',
      reason: 'the account has no webhook_secret to check notifications against',
    };
  const given = presented(req, schemes);
  if (given.length === 0)
    return {
      ok: false,
      code: 'feedback:unauthenticated',
      reason: `no credentials (expected the webhook secret by ${schemes.join(', ')})`,
    };
  // Every comparison runs, so the time taken does not say which one failed.
  const results = given.map((g) => secretsEqual(g.value, secret));
  if (results.every(Boolean)) return null;
  return {
    ok: false,
    code: 'feedback:unauthenticated',
    reason: `the ${given
      .filter((_, i) => !results[i])
      .map((g) => g.scheme)
      .join(', ')} credential does not match the webhook secret`,
  };
}
