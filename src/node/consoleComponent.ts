import type { Clock } from '../clock.js';
import type { ConsoleListenerConfig, PosternConfig } from '../config/load.js';
import {
  type ConsoleDeps,
  type ConsoleServer,
  type ConsoleSettings,
  type ConsoleShared,
  consoleShared,
  createConsoleServer,
} from '../console/server.js';
import { ConnectionLimiter } from '../http/connectionLimit.js';
import type { Logger } from '../log.js';
import { configuredViewerBase } from '../operator/messageLinks.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import type { ListenerTls } from '../tls/httpsListener.js';
import type { AdmissionComponent, OperatorWritesComponent } from './admissionComponents.js';
import type { BoundListener } from './boundListener.js';
import type { Component } from './components.js';
import type { DeliveryComponent } from './engineComponents.js';
import type { StoreComponent } from './storeComponent.js';

export type ConsolePlansSection = Pick<PosternConfig, 'plans' | 'default_plan' | 'limits'>;

export type ConsoleDoorDeps = Pick<ConsoleDeps, 'bodyBudget' | 'metrics' | 'readiness'> & {
  listeners: () => readonly BoundListener[];
};

/** The console's state shared by every console listener of the node: settings, connection caps, activity, live streams. */
export class ConsoleComponent implements Component<ConsolePlansSection> {
  readonly name = 'console';
  private readonly settings: ConsoleSettings;
  private readonly connections: ConnectionLimiter;
  private shared: ConsoleShared | null = null;

  constructor(
    section: ConsoleSettings,
    private readonly deps: {
      store: StoreComponent;
      operator: OperatorWritesComponent;
      admission: AdmissionComponent;
      delivery: DeliveryComponent;
      proxies: TrustedProxies;
      clock: Clock;
      logger: Logger;
    },
  ) {
    // The console's own copy: a reload sets its live sections here, and nowhere else.
    this.settings = { ...section };
    this.connections = new ConnectionLimiter(
      section.console.max_connections,
      section.console.max_connections_per_ip,
      deps.proxies,
    );
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {}

  reload(section: ConsolePlansSection): void {
    this.settings.plans = section.plans;
    this.settings.default_plan = section.default_plan;
    this.settings.limits = section.limits;
  }

  streamFigures(): ReturnType<ConsoleShared['live']['figures']> {
    return this.shared?.live.figures() ?? { open: 0, queuedPeakBytes: 0 };
  }

  server(
    listener: ConsoleListenerConfig,
    tls: ListenerTls | null,
    door: ConsoleDoorDeps,
  ): ConsoleServer {
    const { store, operator, admission, delivery, proxies, clock, logger } = this.deps;
    const { settings } = this;
    const base = {
      store: store.node.store,
      clock,
      logger,
      config: settings,
      spoolRoot: store.spool.root,
    };
    this.shared ??= consoleShared(base);
    const { listeners } = door;
    return createConsoleServer(
      {
        ...base,
        writer: operator.writer,
        keyUse: operator.keyUse,
        connections: this.connections,
        bodyBudget: door.bodyBudget,
        proxies,
        signIns: admission.signIns,
        shared: this.shared,
        throttledUntil: (id) => delivery.handOffs.accountThrottledUntil(id),
        metrics: door.metrics,
        readiness: door.readiness,
        viewerLinks: { secret: store.secret, base: () => viewerBase(settings, listeners()) },
        doors: () => ({
          production:
            listeners().find((l) => l.protocol === 'http' && l.environment === 'production')?.url ??
            null,
          sandbox:
            listeners().find((l) => l.protocol === 'http' && l.environment === 'sandbox')?.url ??
            null,
        }),
      },
      listener,
      tls,
    );
  }
}

/** `viewer.base_url`, else the first production HTTP listener as bound. */
function viewerBase(
  config: Pick<PosternConfig, 'viewer' | 'listeners'>,
  listeners: readonly BoundListener[],
): string {
  const door =
    listeners.find((l) => l.protocol === 'http' && l.environment === 'production') ??
    listeners.find((l) => l.protocol === 'http');
  return config.viewer.base_url ?? door?.url ?? configuredViewerBase(config) ?? '';
}
