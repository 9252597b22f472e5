import os from 'node:os';
import type { Clock } from '../clock.js';
import type { Bookkeeping } from '../commit/bookkeepingChannel.js';
import type { PosternConfig } from '../config/load.js';
import { createDelivery, type Delivery } from '../delivery/deliveryWork.js';
import { dkimKeyFor, dkimSignatureFor } from '../dkim/sign.js';
import { createWebhookDispatcher, type WebhookDispatcherHandle } from '../events/host.js';
import type { Logger } from '../log.js';
import { openMimeOfJob } from '../providers/adapter.js';
import { createAdapterRegistry } from '../providers/registry.js';
import type { AcceptanceComponent } from './acceptanceComponent.js';
import { type Component, sameSection } from './components.js';
import type { StoreComponent } from './storeComponent.js';

export type DeliverySection = Pick<PosternConfig, 'delivery' | 'node'> & {
  smtp: Pick<PosternConfig['smtp'], 'hostname'>;
};

/** Delivery: the providers' adapters and the leased-work engine (when delivery.enabled). */
export class DeliveryComponent implements Component {
  readonly name = 'delivery';
  private running: {
    delivery: Delivery;
    bookkeeping: Bookkeeping;
    closeAdapters: () => Promise<void>;
  } | null = null;
  private stopped = false;

  constructor(
    private readonly section: DeliverySection,
    private readonly deps: {
      store: StoreComponent;
      acceptance: AcceptanceComponent;
      clock: Clock;
      logger: Logger;
    },
  ) {}

  get handOffs(): Delivery['handOffs'] {
    if (!this.running) throw new Error('delivery is not started');
    return this.running.delivery.handOffs;
  }

  async start(): Promise<void> {
    const { section } = this;
    const { store, acceptance, clock, logger } = this.deps;
    const queries = store.node.store;
    const adapters = createAdapterRegistry({
      clock,
      apiTimeoutMs: section.delivery.api_timeout_ms,
      smtpTimeoutMs: section.delivery.smtp_timeout_ms,
      smtpPoolSize: section.delivery.smtp_pool_size,
      heloName: section.smtp.hostname ?? os.hostname(),
    });
    const bookkeeping = store.node.openBookkeeping();
    const delivery = createDelivery({
      store: store.node.deliveryStore,
      bookkeeping,
      nodeId: section.node.id,
      spoolRoot: store.spool.root,
      clock,
      logger,
      config: { delivery: section.delivery },
      adapterFor: (slug) => adapters.adapterFor(slug),
      // A large file is opened only when a key applies (most messages have none), and streamed.
      sign: async (projectId, domain, stored) =>
        (await dkimKeyFor(queries, projectId, domain))
          ? dkimSignatureFor(
              queries,
              projectId,
              domain,
              stored.mime ? stored.mime : openMimeOfJob(stored),
              new Date(clock.now()),
            )
          : null,
    });
    this.running = { delivery, bookkeeping, closeAdapters: () => adapters.close() };
    if (section.delivery.enabled) {
      acceptance.whenDue(() => delivery.engine.kick());
      delivery.engine.start();
    }
  }

  /** Its hand-offs stay readable (a last /metrics scrape) after it stops. */
  async stop(): Promise<void> {
    const running = this.running;
    if (!running || this.stopped) return;
    this.stopped = true;
    await running.delivery.engine.stop();
    running.bookkeeping.close();
    await running.closeAdapters();
  }
}

export type WebhooksSection = Pick<PosternConfig, 'webhooks' | 'node'>;

/** Outbound webhooks (webhooks.enabled), on a thread of their own (src/events/host.ts). */
export class WebhooksComponent implements Component<Pick<PosternConfig, 'log'>> {
  readonly name = 'webhooks';
  private dispatcher: WebhookDispatcherHandle | null = null;

  constructor(
    private readonly section: WebhooksSection,
    private log: Pick<PosternConfig, 'log'>,
    private readonly deps: { store: StoreComponent; clock: Clock; logger: Logger },
  ) {}

  async start(): Promise<void> {
    if (!this.section.webhooks.enabled) return;
    const { store, clock, logger } = this.deps;
    const { node } = store;
    this.dispatcher = createWebhookDispatcher({
      location: node.location,
      clock,
      logger,
      config: { webhooks: this.section.webhooks },
      nodeId: this.section.node.id,
      openBookkeepingPort: () => node.openBookkeepingPort(),
    });
    this.dispatcher.start();
  }

  async stop(): Promise<void> {
    const dispatcher = this.dispatcher;
    this.dispatcher = null;
    await dispatcher?.stop();
  }

  reload(section: Pick<PosternConfig, 'log'>): void {
    if (sameSection(section, this.log)) return;
    this.log = section;
    this.dispatcher?.setLogLevel(process.env.POSTERN_LOG_LEVEL || section.log.level);
  }
}
