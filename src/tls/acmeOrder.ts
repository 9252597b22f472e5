/** One ACME order (RFC 8555) with acme-client, which writes and signs every request; nothing of the protocol is written here. */
import { readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { rootCertificates } from 'node:tls';
import acme, { type Authorization } from 'acme-client';
import type { Logger } from '../log.js';
import type { AcmeChallenges, ChallengeKind } from './acmeChallenges.js';
import { type CertificatePair, certificatePair, coversExactly } from './certificatePair.js';

export interface OrderRequest {
  directoryUrl: string;
  email: string;
  domains: readonly string[];
  challenge: ChallengeKind;
  accountKey: string;
  challenges: AcmeChallenges;
  logger: Logger;
}

const REQUEST_TIMEOUT_MS = 30_000;

/** acme-client's HTTP client, once per process: no retries of its own (a failed order is retried whole on Postern's backoff). */
export function configureAcmeHttp(directoryCa: string | null, logger: Logger): void {
  const defaults = acme.axios.defaults;
  defaults.timeout = REQUEST_TIMEOUT_MS;
  // acme-client's own field of its axios defaults (src/axios.js of the pinned version), unknown to axios's types.
  Object.assign(defaults, {
    acmeSettings: {
      httpChallengePort: 80,
      httpsChallengePort: 443,
      tlsAlpnChallengePort: 443,
      retryMaxAttempts: 0,
      retryDefaultDelay: 5,
    },
  });
  defaults.httpsAgent = directoryCa
    ? new Agent({ ca: [...rootCertificates, readFileSync(directoryCa, 'utf8')], keepAlive: true })
    : new Agent({ keepAlive: true });
  acme.setLogger((message: string) => logger.debug({ acme: message }, 'acme-client'));
}

export async function orderCertificate(request: OrderRequest): Promise<CertificatePair> {
  const { domains, challenge, challenges } = request;
  const client = new acme.Client({
    directoryUrl: request.directoryUrl,
    accountKey: request.accountKey,
    backoffAttempts: 12,
    backoffMin: 500,
    backoffMax: 10_000,
  });
  const [key, csr] = await acme.crypto.createCsr({
    commonName: domains[0],
    altNames: [...domains],
  });
  const answered = async (
    authz: Authorization,
    offered: { type: string; token: string },
    keyAuthorization: string,
  ) => {
    if (offered.type !== challenge)
      throw new Error(
        `the CA offers no ${challenge} challenge for ${authz.identifier.value} (only ${authz.challenges.map((c) => c.type).join(', ')})`,
      );
    await challenges.add({
      token: offered.token,
      kind: challenge,
      domain: authz.identifier.value.toLowerCase(),
      keyAuthorization,
    });
  };
  const pem = await client.auto({
    csr,
    email: request.email,
    termsOfServiceAgreed: true,
    // acme-client's check goes through this host's resolver and routes, which often cannot reach its public address (NAT).
    skipChallengeVerification: true,
    challengePriority: [challenge],
    challengeCreateFn: answered,
    challengeRemoveFn: async (authz, offered) => {
      await challenges.remove({
        token: offered.token,
        kind: challenge,
        domain: authz.identifier.value.toLowerCase(),
      });
    },
  });
  const pair = certificatePair(pem, key, `the certificate ${request.directoryUrl} issued`);
  if (!coversExactly(pair, domains))
    throw new Error(
      `the CA issued a certificate for ${pair.names.join(', ')}, not for ${domains.join(', ')}`,
    );
  return pair;
}
