/** tls.acme: the certificate `acme: true` listeners serve, renewed at two thirds of its life (docs/tls.md#automatic-certificates-tlsacme). */
import acme from 'acme-client';
import { generate } from 'selfsigned';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { countCertificateOrderFailure } from '../platform/metrics.js';
import { AcmeChallenges } from './acmeChallenges.js';
import { configureAcmeHttp, orderCertificate } from './acmeOrder.js';
import {
  type CertificatePair,
  CertificatePairError,
  certificatePair,
  coversExactly,
} from './certificatePair.js';
import type { CertificateStorage } from './certificateStorage.js';
import { ServedCertificate } from './servedCertificate.js';

export type AcmeSettings = NonNullable<PosternConfig['tls']['acme']>;

export type AcmeCheck =
  | 'fresh'
  /** A certificate another node (or an earlier run) stored was taken up. */
  | 'adopted'
  | 'obtained'
  /** Due, but an order failed lately: waiting out the backoff. */
  | 'waiting'
  | 'failed';

/** Each further failure doubles it, up to RETRY_MAX_MS. */
export const RETRY_MIN_MS = 5 * 60_000;
export const RETRY_MAX_MS = 6 * 3_600_000;
/** The clock may be moved, or another node may have renewed. */
const CHECK_EVERY_MS = 3_600_000;
const STOP_WAIT_MS = 10_000;

export function retryDelay(failures: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.max(0, failures - 1));
}

export function renewalTime(pair: CertificatePair): number {
  return pair.notBefore + Math.floor(((pair.notAfter - pair.notBefore) * 2) / 3);
}

export interface AcmeDeps {
  settings: AcmeSettings;
  storage: CertificateStorage;
  clock: Clock;
  logger: Logger;
}

export class AcmeCertificates {
  readonly name: string;
  readonly certificate: ServedCertificate;
  readonly challenges: AcmeChallenges;
  private readonly settings: AcmeSettings;
  private readonly storage: CertificateStorage;
  private readonly clock: Clock;
  private readonly log: Logger;
  private running: Promise<AcmeCheck> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private retryAt = 0;
  private obtainedAt = Number.NEGATIVE_INFINITY;
  private error: string | null = null;

  private constructor(deps: AcmeDeps, served: ServedCertificate) {
    this.settings = deps.settings;
    this.storage = deps.storage;
    this.clock = deps.clock;
    this.name = deps.settings.domains[0];
    this.log = deps.logger.child({ certificate: this.name });
    this.certificate = served;
    this.challenges = new AcmeChallenges(deps.clock, deps.storage.sharedChallenges);
  }

  /** Nothing is ordered before start(), once the listeners that answer the CA are up. */
  static async open(deps: AcmeDeps): Promise<AcmeCertificates> {
    const { settings, storage, clock, logger } = deps;
    configureAcmeHttp(settings.directory_ca, logger);
    const name = settings.domains[0];
    let stored: CertificatePair | null = null;
    try {
      stored = await storage.load(name);
    } catch (err) {
      // A pair that does not parse is replaced; a refused file or an unanswering database stops the start.
      if (!(err instanceof CertificatePairError)) throw err;
      logger.warn(
        { certificate: name, error: err.message },
        'the stored ACME certificate does not load: a new one is ordered',
      );
    }
    const usable =
      stored && coversExactly(stored, settings.domains) && stored.notAfter > clock.now()
        ? stored
        : null;
    if (stored && !usable)
      logger.warn(
        {
          certificate: name,
          names: stored.names,
          not_after: new Date(stored.notAfter).toISOString(),
        },
        'the stored ACME certificate names other domains or has expired: a new one is ordered',
      );
    const served = usable
      ? new ServedCertificate(name, usable)
      : new ServedCertificate(name, await placeholder(settings.domains, clock.now()), {
          placeholder: true,
        });
    countCertificateOrderFailure(name, 0);
    return new AcmeCertificates(deps, served);
  }

  start(): void {
    void this.check();
  }

  get lastError(): string | null {
    return this.error;
  }

  /** Concurrent calls share one check. */
  check(): Promise<AcmeCheck> {
    if (this.stopped) return Promise.resolve('fresh');
    this.running ??= this.runCheck().finally(() => {
      this.running = null;
      this.schedule();
    });
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.running) {
      let waited: NodeJS.Timeout | undefined;
      await Promise.race([
        this.running.catch(() => undefined),
        new Promise((resolve) => (waited = setTimeout(resolve, STOP_WAIT_MS))),
      ]);
      clearTimeout(waited);
    }
  }

  private dueAt(): number {
    if (this.certificate.placeholder) return Number.NEGATIVE_INFINITY;
    // A certificate due the moment it is issued (a clock far ahead of the CA's) is not ordered again and again.
    return Math.max(renewalTime(this.certificate.pair), this.obtainedAt + RETRY_MIN_MS);
  }

  private due(now: number): boolean {
    return now >= this.dueAt();
  }

  private async runCheck(): Promise<AcmeCheck> {
    try {
      const adopted = await this.adoptStored();
      if (!this.due(this.clock.now())) return adopted ? 'adopted' : 'fresh';
      if (await this.backingOff()) return 'waiting';
      return await this.storage.exclusively(this.name, async () => {
        // Another node may have ordered while this one waited for its turn.
        if ((await this.adoptStored()) && !this.due(this.clock.now())) return 'adopted';
        if (await this.backingOff()) return 'waiting';
        return this.order();
      });
    } catch (err) {
      return this.failed(err);
    }
  }

  private async order(): Promise<AcmeCheck> {
    const { directory_url: directoryUrl, email, domains, challenge } = this.settings;
    const started = this.clock.now();
    this.log.info(
      { domains, challenge, directory: directoryUrl, renewing: !this.certificate.placeholder },
      'ordering a certificate (ACME)',
    );
    const accountKey = await this.storage.accountKey(
      directoryUrl,
      async () => (await acme.crypto.createPrivateEcdsaKey()).toString(),
      started,
    );
    const pair = await orderCertificate({
      directoryUrl,
      email,
      domains,
      challenge,
      accountKey,
      challenges: this.challenges,
      logger: this.log,
    });
    await this.storage.save(this.name, domains, pair, this.clock.now());
    await this.storage.clearFailures(this.name);
    this.obtainedAt = this.clock.now();
    this.install(pair, 'obtained');
    this.error = null;
    this.retryAt = 0;
    return 'obtained';
  }

  private async failed(err: unknown): Promise<AcmeCheck> {
    const error = err instanceof Error ? err.message : String(err);
    const now = this.clock.now();
    this.error = error;
    countCertificateOrderFailure(this.name);
    try {
      await this.storage.recordFailure(this.name, error, now);
    } catch (recordErr) {
      this.log.warn({ err: recordErr }, 'the failed ACME order could not be recorded');
    }
    const run = await this.storage.failedOrders(this.name).catch(() => null);
    this.retryAt = now + retryDelay(run?.failures ?? 1);
    const served = this.certificate.placeholder
      ? 'none yet (a self-signed placeholder)'
      : `the current one, valid until ${new Date(this.certificate.pair.notAfter).toISOString()}`;
    this.log.error(
      {
        error,
        failures: run?.failures ?? 1,
        retry_at: new Date(this.retryAt).toISOString(),
        served,
      },
      'ACME order failed; the certificate served so far is kept',
    );
    return 'failed';
  }

  private async backingOff(): Promise<boolean> {
    const run = await this.storage.failedOrders(this.name);
    if (!run) return false;
    this.retryAt = run.failedAt + retryDelay(run.failures);
    this.error = run.error;
    return this.clock.now() < this.retryAt;
  }

  private async adoptStored(): Promise<boolean> {
    if (!this.storage.sharedChallenges) return false;
    const stored = await this.storage.load(this.name);
    if (
      !stored ||
      !coversExactly(stored, this.settings.domains) ||
      stored.notAfter <= this.clock.now()
    )
      return false;
    if (!this.certificate.placeholder && stored.notAfter <= this.certificate.pair.notAfter)
      return false;
    this.install(stored, 'adopted');
    return true;
  }

  private install(pair: CertificatePair, how: 'obtained' | 'adopted'): void {
    const first = this.certificate.placeholder;
    this.certificate.replace(pair);
    this.log.info(
      {
        how,
        serial: pair.serial,
        names: pair.names,
        not_after: new Date(pair.notAfter).toISOString(),
        renew_at: new Date(renewalTime(pair)).toISOString(),
      },
      first ? 'ACME certificate installed' : 'ACME certificate renewed; new connections get it',
    );
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    const now = this.clock.now();
    const at = Math.max(this.dueAt(), this.retryAt);
    const delay = Math.min(CHECK_EVERY_MS, Math.max(1000, at - now));
    this.timer = setTimeout(() => void this.check(), delay);
    this.timer.unref();
  }
}

async function placeholder(domains: readonly string[], now: number): Promise<CertificatePair> {
  const pems = await generate([{ name: 'commonName', value: domains[0] }], {
    keyType: 'ec',
    notBeforeDate: new Date(now - 60_000),
    notAfterDate: new Date(now + 7 * 86_400_000),
    algorithm: 'sha256',
    extensions: [
      { name: 'subjectAltName', altNames: domains.map((value) => ({ type: 2 as const, value })) },
    ],
  });
  return certificatePair(pems.cert, pems.private, 'the placeholder certificate');
}
