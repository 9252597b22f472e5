/**
 * The answers to the ACME challenges of an order in progress: HTTP-01 (a token's key
 * authorization at /.well-known/acme-challenge/<token>, on the plain listener) and TLS-ALPN-01
 * (a self-signed certificate holding the key authorization's digest, for a handshake that asks
 * for the `acme-tls/1` protocol, on the HTTPS listeners; RFC 8737). The ordering node keeps them
 * in memory; on PostgreSQL they are also rows, so a node the CA's validation reaches that did not
 * place the order answers too.
 */
import { createSecureContext, type SecureContext } from 'node:tls';
import acme from 'acme-client';
import type { Clock } from '../clock.js';

export type ChallengeKind = 'http-01' | 'tls-alpn-01';

export interface ChallengeAnswer {
  token: string;
  kind: ChallengeKind;
  domain: string;
  keyAuthorization: string;
  expiresAt: number;
}

/** Challenges every node can read (PostgreSQL): written by the ordering node. */
export interface SharedChallenges {
  put(answer: ChallengeAnswer): Promise<void>;
  remove(token: string, now: number): Promise<void>;
  httpAnswer(token: string, now: number): Promise<string | undefined>;
  alpnAnswer(domain: string, now: number): Promise<string | undefined>;
}

/** How long a challenge is answered at most (an order that hangs does not leave one behind for ever). */
const CHALLENGE_LIFETIME_MS = 10 * 60_000;
/** A token is base64url (RFC 8555 §8.1): anything else is not looked up. */
const TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

export class AcmeChallenges {
  private readonly http = new Map<string, ChallengeAnswer>();
  private readonly alpn = new Map<string, ChallengeAnswer>();
  /** Contexts built for a key authorization (any node may be asked for it several times). */
  private readonly contexts = new Map<string, Promise<SecureContext>>();
  private challengeKey: Promise<Buffer> | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly shared: SharedChallenges | null,
  ) {}

  async add(answer: Omit<ChallengeAnswer, 'expiresAt'>): Promise<void> {
    const full = { ...answer, expiresAt: this.clock.now() + CHALLENGE_LIFETIME_MS };
    (full.kind === 'http-01' ? this.http : this.alpn).set(full.kind === 'http-01' ? full.token : full.domain, full);
    await this.shared?.put(full);
  }

  async remove(answer: Pick<ChallengeAnswer, 'token' | 'kind' | 'domain'>): Promise<void> {
    if (answer.kind === 'http-01') this.http.delete(answer.token);
    else if (this.alpn.get(answer.domain)?.token === answer.token) this.alpn.delete(answer.domain);
    await this.shared?.remove(answer.token, this.clock.now());
  }

  /** The body answering GET /.well-known/acme-challenge/<token>, or null. */
  async httpAnswer(token: string): Promise<string | null> {
    if (!TOKEN.test(token)) return null;
    const now = this.clock.now();
    const local = this.http.get(token);
    if (local && local.expiresAt > now) return local.keyAuthorization;
    return (await this.shared?.httpAnswer(token, now)) ?? null;
  }

  /** The TLS-ALPN-01 certificate for a handshake to `domain` that asked for acme-tls/1, or null. */
  async alpnContext(domain: string): Promise<SecureContext | null> {
    const now = this.clock.now();
    const local = this.alpn.get(domain);
    const keyAuthorization = local && local.expiresAt > now ? local.keyAuthorization : await this.shared?.alpnAnswer(domain, now);
    if (!keyAuthorization) return null;
    const cacheKey = `${domain}\n${keyAuthorization}`;
    let context = this.contexts.get(cacheKey);
    if (!context) {
      context = this.buildAlpnContext(domain, keyAuthorization);
      this.contexts.set(cacheKey, context);
      // Built for one validation: a later order has another key authorization.
      setTimeout(() => this.contexts.delete(cacheKey), CHALLENGE_LIFETIME_MS).unref();
      context.catch(() => this.contexts.delete(cacheKey));
    }
    return context;
  }

  private async buildAlpnContext(domain: string, keyAuthorization: string): Promise<SecureContext> {
    // One P-256 key for every challenge certificate of the process: it proves nothing itself
    // (the digest in the certificate does), and an RSA key costs a noticeable pause per order.
    this.challengeKey ??= acme.crypto.createPrivateEcdsaKey();
    const key = await this.challengeKey;
    const authorization = { url: '', identifier: { type: 'dns', value: domain }, status: 'pending' as const, challenges: [] };
    const [, cert] = await acme.crypto.createAlpnCertificate(authorization, keyAuthorization, key);
    return createSecureContext({ cert, key, minVersion: 'TLSv1.2' });
  }
}
