import type { Clock } from '../clock.js';
import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import type { PosternConfig } from '../config/load.js';
import { SignInThrottle } from '../console/auth.js';
import type { Logger } from '../log.js';
import type { OperatorSettings, OperatorWriter } from '../operator/context.js';
import { KeyUseRecorder } from '../operator/keyUse.js';
import { writerThrough } from '../operator/writer.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import { Admission } from '../policy/admission.js';
import { RateWindowFactory } from '../policy/rateWindowFactory.js';
import { Viewer } from '../viewer/route.js';
import { type Component, sameSection } from './components.js';
import type { StoreComponent } from './storeComponent.js';

export class OperatorWritesComponent implements Component {
  readonly name = 'operator writes';
  private running: {
    bookkeeping: Bookkeeping;
    writer: OperatorWriter;
    keyUse: KeyUseRecorder;
  } | null = null;

  constructor(private readonly deps: { store: StoreComponent; clock: Clock; logger: Logger }) {}

  get writer(): OperatorWriter {
    return this.started().writer;
  }

  get keyUse(): KeyUseRecorder {
    return this.started().keyUse;
  }

  async start(): Promise<void> {
    const bookkeeping = this.deps.store.node.openBookkeeping();
    const writer = writerThrough(
      async (work) => (await bookkeeping.write('operator', work)).result,
    );
    const keyUse = new KeyUseRecorder(writer, this.deps.clock, this.deps.logger);
    keyUse.start();
    this.running = { bookkeeping, writer, keyUse };
  }

  async stop(): Promise<void> {
    const running = this.running;
    this.running = null;
    if (!running) return;
    await running.keyUse.stop();
    running.bookkeeping.close();
  }

  private started(): NonNullable<OperatorWritesComponent['running']> {
    if (!this.running) throw new Error('operator writes are not started');
    return this.running;
  }
}

export type AdmissionSection = OperatorSettings & Pick<PosternConfig, 'rate_limits'>;

/** Every sliding window of the node; the console's sign-in throttle is one per node, not per listener. */
export class AdmissionComponent implements Component<Pick<PosternConfig, 'rate_limits'>> {
  readonly name = 'admission';
  private running: {
    windows: RateWindowFactory;
    admission: Admission;
    signIns: SignInThrottle;
    viewer: Viewer;
  } | null = null;
  private current: Pick<PosternConfig, 'rate_limits'>;

  constructor(
    private readonly section: AdmissionSection,
    private readonly deps: {
      store: StoreComponent;
      operator: OperatorWritesComponent;
      proxies: TrustedProxies;
      clock: Clock;
      logger: Logger;
    },
  ) {
    this.current = section;
  }

  get admission(): Admission {
    return this.started().admission;
  }

  get signIns(): SignInThrottle {
    return this.started().signIns;
  }

  get viewer(): Viewer {
    return this.started().viewer;
  }

  async start(): Promise<void> {
    const { section } = this;
    const { store, operator, proxies, clock, logger } = this.deps;
    const queries = store.node.store;
    const windows = new RateWindowFactory(queries, clock, (err) =>
      logger.warn({ err }, 'pruning the shared rate windows failed; tried again a window later'),
    );
    const keyUse = operator.keyUse;
    const admission = new Admission(
      queries,
      clock,
      { rate_limits: section.rate_limits, policy: section.policy },
      windows,
      (keyId) => keyUse.note(keyId),
    );
    const signIns = new SignInThrottle(section, windows, logger);
    const viewer = new Viewer({
      ctx: { store: queries, clock, config: section, spoolRoot: store.spool.root },
      rateLimits: section.rate_limits,
      windows,
      logger,
      secret: store.secret,
      proxies,
    });
    this.running = { windows, admission, signIns, viewer };
  }

  async stop(): Promise<void> {
    const running = this.running;
    this.running = null;
    await running?.windows.settled();
  }

  /** Only a change of rate_limits makes new windows: any other reload keeps what they counted. */
  reload(section: Pick<PosternConfig, 'rate_limits'>): void {
    const running = this.started();
    if (sameSection(section.rate_limits, this.current.rate_limits)) return;
    this.current = section;
    running.admission.updateRateLimits(section.rate_limits);
    running.viewer.updateRateLimits(section.rate_limits);
  }

  private started(): NonNullable<AdmissionComponent['running']> {
    if (!this.running) throw new Error('admission is not started');
    return this.running;
  }
}
