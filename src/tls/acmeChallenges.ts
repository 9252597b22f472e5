/** The answers to an order's HTTP-01 and TLS-ALPN-01 challenges; on PostgreSQL also rows, so any node the CA reaches answers. */
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

export interface SharedChallenges {
  put(answer: ChallengeAnswer): Promise<void>;
  remove(token: string, now: number): Promise<void>;
  httpAnswer(token: string, now: number): Promise<string | undefined>;
  alpnAnswer(domain: string, now: number): Promise<string | undefined>;
}

/** An order that hangs does not leave one behind for ever. */
const CHALLENGE_LIFETIME_MS = 10 * 60_000;
/** A token is base64url (RFC 8555 §8.1): anything else is not looked up. */
const TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

export class AcmeChallenges {
  private readonly http = new Map<string, ChallengeAnswer>();
  private readonly alpn = new Map<string, ChallengeAnswer>();
  private readonly contexts = new Map<string, Promise<SecureContext>>();
  private challengeKey: Promise<Buffer> | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly shared: SharedChallenges | null,
  ) {}

  async add(answer: Omit<ChallengeAnswer, 'expiresAt'>): Promise<void> {
    const full = { ...answer, expiresAt: this.clock.now() + CHALLENGE_LIFETIME_MS };
    (full.kind === 'http-01' ? this.http : this.alpn).set(
      full.kind === 'http-01' ? full.token : full.domain,
      full,
    );
    await this.shared?.put(full);
  }

  async remove(answer: Pick<ChallengeAnswer, 'token' | 'kind' | 'domain'>): Promise<void> {
    if (answer.kind === 'http-01') this.http.delete(answer.token);
    else if (this.alpn.get(answer.domain)?.token === answer.token) this.alpn.delete(answer.domain);
    await this.shared?.remove(answer.token, this.clock.now());
  }

  async httpAnswer(token: string): Promise<string | null> {
    if (!TOKEN.test(token)) return null;
    const now = this.clock.now();
    const local = this.http.get(token);
    if (local && local.expiresAt > now) return local.keyAuthorization;
    return (await this.shared?.httpAnswer(token, now)) ?? null;
  }

  async alpnContext(domain: string): Promise<SecureContext | null> {
    const now = this.clock.now();
    const local = this.alpn.get(domain);
    const keyAuthorization =
      local && local.expiresAt > now
        ? local.keyAuthorization
        : await this.shared?.alpnAnswer(domain, now);
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
    // One P-256 key for every challenge certificate: it proves nothing itself, and an RSA key costs a pause per order.
    this.challengeKey ??= acme.crypto.createPrivateEcdsaKey();
    const key = await this.challengeKey;
    const authorization = {
      url: '',
      identifier: { type: 'dns', value: domain },
      status: 'pending' as const,
      challenges: [],
    };
    const [, cert] = await acme.crypto.createAlpnCertificate(authorization, keyAuthorization, key);
    return createSecureContext({ cert, key, minVersion: 'TLSv1.2' });
  }
}
