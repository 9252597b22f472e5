/**
 * One ACME order (RFC 8555) with acme-client: the account (created at the CA the first time; its
 * key is the caller's), an order naming the domains, their challenges answered through
 * AcmeChallenges, a new key and CSR, the certificate downloaded. acme-client writes and signs
 * every request (JWS); nothing of the protocol is written here.
 */
import { readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { rootCertificates } from 'node:tls';
import acme, { type Authorization } from 'acme-client';
import type { Logger } from '../log.js';
import type { AcmeChallenges, ChallengeKind } from './acmeChallenges.js';
import { certificatePair, coversExactly, type CertificatePair } from './certificatePair.js';

export interface OrderRequest {
  directoryUrl: string;
  email: string;
  domains: readonly string[];
  challenge: ChallengeKind;
  /** The account's private key (PEM). */
  accountKey: string;
  challenges: AcmeChallenges;
  logger: Logger;
}

/** How long one request to the CA may take. */
const REQUEST_TIMEOUT_MS = 30_000;

/**
 * acme-client's HTTP client is one per process (its documented `acme.axios.defaults`): the CA's
 * own trust, no retries of its own (a failed order is retried whole, on Postern's backoff, so a
 * CA that is down costs one attempt, not five spaced over 75 s), a timeout, and its debug lines.
 */
export function configureAcmeHttp(directoryCa: string | null, logger: Logger): void {
  const defaults = acme.axios.defaults;
  defaults.timeout = REQUEST_TIMEOUT_MS;
  // acmeSettings is acme-client's own field of its axios defaults (src/axios.js of the pinned
  // version), which axios's types do not know.
  Object.assign(defaults, { acmeSettings: { httpChallengePort: 80, httpsChallengePort: 443, tlsAlpnChallengePort: 443, retryMaxAttempts: 0, retryDefaultDelay: 5 } });
  defaults.httpsAgent = directoryCa ? new Agent({ ca: [...rootCertificates, readFileSync(directoryCa, 'utf8')], keepAlive: true }) : new Agent({ keepAlive: true });
  acme.setLogger((message: string) => logger.debug({ acme: message }, 'acme-client'));
}

/** Orders a certificate for `domains`; resolves with the pair (a new key) once issued. */
export async function orderCertificate(request: OrderRequest): Promise<CertificatePair> {
  const { domains, challenge, challenges } = request;
  const client = new acme.Client({
    directoryUrl: request.directoryUrl,
    accountKey: request.accountKey,
    // Polls of a pending authorization and order: soon at first (a validation takes a second or
    // two), then further apart, for up to about a minute.
    backoffAttempts: 12,
    backoffMin: 500,
    backoffMax: 10_000,
  });
  const [key, csr] = await acme.crypto.createCsr({ commonName: domains[0], altNames: [...domains] });
  const answered = async (authz: Authorization, offered: { type: string; token: string }, keyAuthorization: string) => {
    if (offered.type !== challenge) throw new Error(`the CA offers no ${challenge} challenge for ${authz.identifier.value} (only ${authz.challenges.map((c) => c.type).join(', ')})`);
    await challenges.add({ token: offered.token, kind: challenge, domain: authz.identifier.value.toLowerCase(), keyAuthorization });
  };
  const pem = await client.auto({
    csr,
    email: request.email,
    termsOfServiceAgreed: true,
    // acme-client's own check fetches the challenge through this host's resolver and routes,
    // which often cannot reach its public address (NAT, a load balancer); the CA's validation
    // is the one that counts.
    skipChallengeVerification: true,
    challengePriority: [challenge],
    challengeCreateFn: answered,
    challengeRemoveFn: async (authz, offered) => {
      await challenges.remove({ token: offered.token, kind: challenge, domain: authz.identifier.value.toLowerCase() });
    },
  });
  const pair = certificatePair(pem, key, `the certificate ${request.directoryUrl} issued`);
  if (!coversExactly(pair, domains)) throw new Error(`the CA issued a certificate for ${pair.names.join(', ')}, not for ${domains.join(', ')}`);
  return pair;
}
