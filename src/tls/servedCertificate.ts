/** Replaced in place: new handshakes get the new one, open connections keep theirs. */
import { createSecureContext, type SecureContext } from 'node:tls';
import { setCertificateExpiry } from '../platform/metrics.js';
import type { CertificatePair } from './certificatePair.js';

/** SMTP listeners keep smtp-server's floor for old clients. */
export const HTTPS_MIN_VERSION = 'TLSv1.2' as const;

export type CertificateWatcher = (pair: CertificatePair) => void;

export class ServedCertificate {
  private current: CertificatePair;
  private secureContext: SecureContext;
  private isPlaceholder: boolean;
  private readonly watchers: CertificateWatcher[] = [];

  /** A placeholder counts as no certificate: /readyz fails and no expiry is exported. */
  constructor(
    readonly name: string,
    pair: CertificatePair,
    opts: { placeholder?: boolean } = {},
  ) {
    this.current = pair;
    this.secureContext = contextOf(pair);
    this.isPlaceholder = opts.placeholder ?? false;
    setCertificateExpiry(name, this.isPlaceholder ? null : pair.notAfter);
  }

  get pair(): CertificatePair {
    return this.current;
  }

  get context(): SecureContext {
    return this.secureContext;
  }

  get placeholder(): boolean {
    return this.isPlaceholder;
  }

  validAt(now: number): boolean {
    return !this.isPlaceholder && now < this.current.notAfter;
  }

  replace(pair: CertificatePair): void {
    const context = contextOf(pair);
    this.current = pair;
    this.secureContext = context;
    this.isPlaceholder = false;
    setCertificateExpiry(this.name, pair.notAfter);
    for (const watcher of this.watchers) watcher(pair);
  }

  onReplace(watcher: CertificateWatcher): void {
    this.watchers.push(watcher);
  }
}

function contextOf(pair: CertificatePair): SecureContext {
  return createSecureContext({ cert: pair.cert, key: pair.key, minVersion: HTTPS_MIN_VERSION });
}
