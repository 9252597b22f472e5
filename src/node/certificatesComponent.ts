import type { Clock } from '../clock.js';
import type { ListenerConfig, PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import type { CheckResult } from '../platform/readiness.js';
import { backendOf } from '../store/backendOf.js';
import { AcmeCertificates } from '../tls/acmeCertificates.js';
import { certificatesReady } from '../tls/certificateReadiness.js';
import { DatabaseCertificates, StateDirectoryCertificates } from '../tls/certificateStorage.js';
import { type FileCertificate, listenerCertificate, smtpCertificate } from '../tls/filePairs.js';
import type { ListenerTls } from '../tls/httpsListener.js';
import type { ServedCertificate } from '../tls/servedCertificate.js';
import type { Component } from './components.js';
import type { StoreComponent } from './storeComponent.js';

export type CertificatesSection = Pick<PosternConfig, 'tls' | 'smtp' | 'state_dir' | 'node'>;

/** Every certificate a listener serves; tls.acme's is opened here and ordered by AcmeOrderingComponent once its challenges can be answered. */
export class CertificatesComponent implements Component {
  readonly name = 'certificates';
  acme: AcmeCertificates | null = null;
  private smtpPair: FileCertificate | null = null;
  private readonly filePairs: FileCertificate[] = [];
  private readonly served: ServedCertificate[] = [];

  constructor(
    private readonly section: CertificatesSection,
    private readonly deps: { store: StoreComponent; clock: Clock; logger: Logger },
  ) {}

  async start(): Promise<void> {
    const { section } = this;
    if (!section.tls.acme) return;
    const { store, clock, logger } = this.deps;
    const queries = store.node.store;
    // On PostgreSQL the nodes share the certificate (and take turns ordering it).
    const storage = backendOf(queries).capabilities.sharedCertificates
      ? new DatabaseCertificates(queries, section.node.id)
      : new StateDirectoryCertificates(section.state_dir);
    this.acme = await AcmeCertificates.open({ settings: section.tls.acme, storage, clock, logger });
  }

  /** The certificate objects stay with the listeners still closing. */
  async stop(): Promise<void> {}

  https(listener: {
    name: string;
    cert: string | null;
    key: string | null;
    acme: boolean;
  }): ListenerTls | null {
    const { acme } = this;
    if (listener.acme && acme) {
      this.served.push(acme.certificate);
      return {
        certificate: acme.certificate,
        challenges: this.section.tls.acme?.challenge === 'tls-alpn-01' ? acme.challenges : null,
      };
    }
    if (!listener.cert || !listener.key) return null;
    const pair = listenerCertificate(listener);
    this.filePairs.push(pair);
    this.served.push(pair.certificate);
    return { certificate: pair.certificate };
  }

  /** tls.acme's, or smtp.tls's pair (the state directory's self-signed one without it). */
  async smtp(listener: ListenerConfig): Promise<ServedCertificate> {
    let certificate: ServedCertificate;
    if (listener.acme && this.acme) certificate = this.acme.certificate;
    else {
      this.smtpPair ??= await smtpCertificate(this.section, this.deps.logger);
      certificate = this.smtpPair.certificate;
    }
    this.served.push(certificate);
    return certificate;
  }

  get plainChallenges(): AcmeCertificates['challenges'] | null {
    return this.section.tls.acme?.challenge === 'http-01' ? (this.acme?.challenges ?? null) : null;
  }

  ready(now: number): CheckResult {
    return certificatesReady(this.served, now, this.acme);
  }

  /** Re-reads the pairs the config names in files (SIGHUP); tls.acme's is not an operator's file and is left alone. */
  reloadFiles(): void {
    const failed: string[] = [];
    for (const pair of [...(this.smtpPair ? [this.smtpPair] : []), ...this.filePairs]) {
      try {
        pair.reload();
        this.deps.logger.info(
          { certificate: pair.certificate.name, cert: pair.certPath },
          'TLS certificate reloaded',
        );
      } catch (err) {
        failed.push(
          `${pair.certificate.name}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    if (failed.length > 0) throw new Error(`kept the current certificate of ${failed.join('; ')}`);
  }
}

/** Started once the listeners that answer the CA's challenges are up, stopped first. */
export class AcmeOrderingComponent implements Component {
  readonly name = 'acme ordering';

  constructor(private readonly certificates: CertificatesComponent) {}

  async start(): Promise<void> {
    this.certificates.acme?.start();
  }

  async stop(): Promise<void> {
    await this.certificates.acme?.stop();
  }
}
