/** Where tls.acme keeps what it obtained: the state directory (one node) or PostgreSQL's rows, shared by every node. */
import path from 'node:path';
import {
  ensurePrivateSubdirectory,
  readPrivateFile,
  replacePrivateFile,
} from '../platform/privateFiles.js';
import type { Queries } from '../store/queries.js';
import {
  acmeAccountKey,
  alpnChallengeAnswer,
  clearFailedOrders,
  httpChallengeAnswer,
  lastFailedOrder,
  putAcmeChallenge,
  recordFailedOrder,
  removeAcmeChallenge,
  saveTlsCertificate,
  storedTlsCertificate,
  whileHoldingCertificateLock,
} from '../store/tlsCertificates.js';
import type { SharedChallenges } from './acmeChallenges.js';
import { type CertificatePair, combinedPem, fromCombinedPem } from './certificatePair.js';

export interface FailedOrders {
  failures: number;
  failedAt: number;
  error: string;
}

export interface CertificateStorage {
  readonly where: string;
  /** null when there is none. Throws when it cannot be read. */
  load(name: string): Promise<CertificatePair | null>;
  save(name: string, domains: readonly string[], pair: CertificatePair, now: number): Promise<void>;
  accountKey(directoryUrl: string, create: () => Promise<string>, now: number): Promise<string>;
  /** On PostgreSQL: across the nodes. */
  exclusively<T>(name: string, work: () => Promise<T>): Promise<T>;
  failedOrders(name: string): Promise<FailedOrders | null>;
  recordFailure(name: string, error: string, now: number): Promise<void>;
  clearFailures(name: string): Promise<void>;
  /** null: only this node answers. */
  readonly sharedChallenges: SharedChallenges | null;
}

function fileSafe(name: string): string {
  if (!/^[a-z0-9][a-z0-9.-]*$/.test(name))
    throw new Error(`certificate name ${JSON.stringify(name)} is not a domain name`);
  return name;
}

export class StateDirectoryCertificates implements CertificateStorage {
  private readonly dir: string;
  private readonly failures = new Map<string, FailedOrders>();
  private readonly queue = new Map<string, Promise<unknown>>();
  readonly sharedChallenges = null;

  constructor(stateDir: string) {
    this.dir = path.join(stateDir, 'certs');
  }

  get where(): string {
    return this.dir;
  }

  private fileOf(name: string): string {
    return path.join(this.dir, `acme-${fileSafe(name)}.pem`);
  }

  async load(name: string): Promise<CertificatePair | null> {
    ensurePrivateSubdirectory(this.dir);
    const file = this.fileOf(name);
    const bytes = readPrivateFile(file);
    return bytes === null ? null : fromCombinedPem(bytes.toString(), file);
  }

  async save(name: string, _domains: readonly string[], pair: CertificatePair): Promise<void> {
    ensurePrivateSubdirectory(this.dir);
    replacePrivateFile(this.fileOf(name), combinedPem(pair), 0o600);
  }

  async accountKey(_directoryUrl: string, create: () => Promise<string>): Promise<string> {
    ensurePrivateSubdirectory(this.dir);
    const file = path.join(this.dir, 'acme-account.key');
    const existing = readPrivateFile(file);
    if (existing) return existing.toString();
    const key = await create();
    replacePrivateFile(file, key, 0o600);
    return key;
  }

  async exclusively<T>(name: string, work: () => Promise<T>): Promise<T> {
    const before = this.queue.get(name) ?? Promise.resolve();
    const run = before.then(work, work);
    this.queue.set(
      name,
      run.catch(() => undefined),
    );
    return run;
  }

  async failedOrders(name: string): Promise<FailedOrders | null> {
    return this.failures.get(name) ?? null;
  }

  async recordFailure(name: string, error: string, now: number): Promise<void> {
    const run = this.failures.get(name);
    this.failures.set(name, { failures: (run?.failures ?? 0) + 1, failedAt: now, error });
  }

  async clearFailures(name: string): Promise<void> {
    this.failures.delete(name);
  }
}

export class DatabaseCertificates implements CertificateStorage {
  readonly where = 'the database (tls_certificates)';
  readonly sharedChallenges: SharedChallenges;

  constructor(
    private readonly store: Queries,
    private readonly nodeId: string,
  ) {
    this.sharedChallenges = {
      put: (a) =>
        putAcmeChallenge(store, {
          token: a.token,
          kind: a.kind,
          domain: a.domain,
          key_authorization: a.keyAuthorization,
          expires_at: a.expiresAt,
        }),
      remove: (token, now) => removeAcmeChallenge(store, token, now),
      httpAnswer: (token, now) => httpChallengeAnswer(store, token, now),
      alpnAnswer: (domain, now) => alpnChallengeAnswer(store, domain, now),
    };
  }

  async load(name: string): Promise<CertificatePair | null> {
    const row = await storedTlsCertificate(this.store, name);
    return row ? fromCombinedPem(row.pem, `tls_certificates row ${name}`) : null;
  }

  async save(
    name: string,
    domains: readonly string[],
    pair: CertificatePair,
    now: number,
  ): Promise<void> {
    await saveTlsCertificate(this.store, {
      name,
      domains: JSON.stringify(domains),
      pem: combinedPem(pair),
      not_before: pair.notBefore,
      not_after: pair.notAfter,
      obtained_at: now,
      obtained_by: this.nodeId,
    });
  }

  accountKey(directoryUrl: string, create: () => Promise<string>, now: number): Promise<string> {
    return acmeAccountKey(this.store, directoryUrl, create, now);
  }

  exclusively<T>(name: string, work: () => Promise<T>): Promise<T> {
    return whileHoldingCertificateLock(this.store, name, work);
  }

  async failedOrders(name: string): Promise<FailedOrders | null> {
    const row = await lastFailedOrder(this.store, name);
    return row ? { failures: row.failures, failedAt: row.failed_at, error: row.error } : null;
  }

  recordFailure(name: string, error: string, now: number): Promise<void> {
    return recordFailedOrder(this.store, name, error, now, this.nodeId);
  }

  clearFailures(name: string): Promise<void> {
    return clearFailedOrders(this.store, name);
  }
}
