import type { AcceptPipeline } from './accept/acceptMessage.js';
import { type Clock, systemClock } from './clock.js';
import type { PosternConfig } from './config/load.js';
import type { Logger } from './log.js';
import { AcceptanceComponent } from './node/acceptanceComponent.js';
import { AdmissionComponent, OperatorWritesComponent } from './node/admissionComponents.js';
import type { BoundListener, BoundPlainListener } from './node/boundListener.js';
import { AcmeOrderingComponent, CertificatesComponent } from './node/certificatesComponent.js';
import { ComponentRunner } from './node/components.js';
import { ConsoleComponent } from './node/consoleComponent.js';
import { DoorsComponent, ListeningSockets } from './node/doors.js';
import { DeliveryComponent, WebhooksComponent } from './node/engineComponents.js';
import { HousekeepingComponent } from './node/housekeepingComponent.js';
import { LogLevelComponent } from './node/logLevel.js';
import { nodeMetrics, nodeReadiness } from './node/readiness.js';
import { StoreComponent } from './node/storeComponent.js';
import type { OperatorSettings } from './operator/context.js';
import { applyHeapGrowth } from './platform/heapGrowth.js';
import { setMetricsRecording, setNodeInfo, startProcessMetrics } from './platform/metrics.js';
import { TrustedProxies } from './platform/trustedProxies.js';
import { posternVersion } from './platform/version.js';
import { limitSettings } from './policy/usageLimits.js';
import type { Db } from './store/db.js';
import type { Queries } from './store/queries.js';
import type { AcmeCertificates } from './tls/acmeCertificates.js';

export type { BoundListener, BoundPlainListener } from './node/boundListener.js';

export interface RunningPostern {
  listeners: BoundListener[];
  /** The event loop's SQLite connection (plumbing, and tests); null on PostgreSQL. */
  db: Db | null;
  store: Queries;
  pipeline: AcceptPipeline;
  plain: BoundPlainListener | null;
  certificates: AcmeCertificates | null;
  /** Re-reads the certificate pairs the config names in files (SIGHUP); sessions in progress keep theirs. */
  reloadTls(): void;
  /** Applies LIVE_SECTIONS; the others that changed are returned as needing a restart. */
  reload(next: PosternConfig): ConfigReload;
  close(): Promise<void>;
}

export interface ConfigReload {
  changed: string[];
  restart_needed: string[];
}

/** docs/operations.md#reloading-the-config */
const LIVE_SECTIONS: readonly string[] = ['plans', 'default_plan', 'limits', 'rate_limits', 'log'];

/** Wiring: the node's components, started in dependency order and stopped in reverse. */
export async function startPostern(
  config: PosternConfig,
  logger: Logger,
  clock: Clock = systemClock,
): Promise<RunningPostern> {
  applyHeapGrowth(config.memory.heap_growth_percent);
  setMetricsRecording(config.metrics.enabled);
  if (config.metrics.enabled) startProcessMetrics();
  setNodeInfo(config.node.id, posternVersion());
  // Copied at start (the index writer thread holds its own); acceptance sets them again on a reload.
  const limits = limitSettings(config);
  const proxies = new TrustedProxies(config.http.trusted_proxies);
  const base = { clock, logger };
  const components = new ComponentRunner<PosternConfig>(logger);

  await components.start(new LogLevelComponent({ log: config.log }, logger), (c) => ({
    log: c.log,
  }));
  const store = await components.start(
    new StoreComponent(
      {
        state_dir: config.state_dir,
        store: config.store,
        spool: config.spool,
        metrics: config.metrics,
        node: config.node,
      },
      { ...base, limits },
    ),
  );
  const acceptance = await components.start(
    new AcceptanceComponent(
      { spool: config.spool, state_dir: config.state_dir, policy: config.policy },
      { ...base, store, limits },
    ),
    (c) => ({ plans: c.plans, default_plan: c.default_plan, limits: c.limits }),
  );
  const housekeeping = await components.start(
    new HousekeepingComponent(
      { retention_days: config.retention_days, console: config.console },
      { ...base, store },
    ),
  );
  await components.start(
    new WebhooksComponent(
      { webhooks: config.webhooks, node: config.node },
      { log: config.log },
      { ...base, store },
    ),
    (c) => ({ log: c.log }),
  );
  const delivery = await components.start(
    new DeliveryComponent(
      { delivery: config.delivery, node: config.node, smtp: config.smtp },
      { ...base, store, acceptance },
    ),
  );
  const operator = await components.start(new OperatorWritesComponent({ ...base, store }));
  const admission = await components.start(
    new AdmissionComponent(
      { ...operatorSettingsOf(config), rate_limits: config.rate_limits },
      { ...base, store, operator, proxies },
    ),
    (c) => ({ rate_limits: c.rate_limits }),
  );
  const certificates = await components.start(
    new CertificatesComponent(
      { tls: config.tls, smtp: config.smtp, state_dir: config.state_dir, node: config.node },
      { ...base, store },
    ),
  );
  const console = await components.start(
    new ConsoleComponent(
      {
        ...operatorSettingsOf(config),
        http: config.http,
        metrics: config.metrics,
        store: config.store,
      },
      { ...base, store, operator, admission, delivery, proxies },
    ),
    (c) => ({ plans: c.plans, default_plan: c.default_plan, limits: c.limits }),
  );
  const { node } = store;
  const { disk } = acceptance;
  const sockets = new ListeningSockets();
  const readiness = nodeReadiness({
    pipeline: acceptance.pipeline,
    indexWriter: node.acceptance,
    disk,
    sockets,
    certificates,
    clock,
  });
  const metrics = config.metrics.enabled
    ? nodeMetrics({
        store: node.store,
        stateDir: config.state_dir,
        clock,
        disk,
        indexWriter: node.acceptance,
        delivery,
        sockets,
        console,
      })
    : null;
  const doors = await components.start(
    new DoorsComponent(
      {
        listeners: config.listeners,
        http: config.http,
        smtp: config.smtp,
        feedback: config.feedback,
        node: config.node,
        console: config.console,
      },
      {
        ...base,
        acceptance,
        admission,
        housekeeping,
        console,
        certificates,
        sockets,
        readiness,
        metrics,
        proxies,
      },
    ),
  );
  await components.start(new AcmeOrderingComponent(certificates));
  // From here on this connection only reads: a write would wait on busy_timeout while the writer holds the lock.
  node.sqlite?.pragma('query_only = 1');

  let running = config;
  let closed = false;
  return {
    listeners: doors.listeners,
    db: node.sqlite,
    store: node.store,
    pipeline: acceptance.pipeline,
    plain: doors.plain,
    certificates: certificates.acme,
    reloadTls() {
      certificates.reloadFiles();
    },
    reload(next) {
      const result: ConfigReload = { changed: [], restart_needed: [] };
      const before = new Map(Object.entries(running));
      const after = new Map(Object.entries(next));
      for (const key of new Set([...before.keys(), ...after.keys()])) {
        if (JSON.stringify(before.get(key)) === JSON.stringify(after.get(key))) continue;
        (LIVE_SECTIONS.includes(key) ? result.changed : result.restart_needed).push(key);
      }
      if (result.changed.length === 0) return result;
      running = {
        ...running,
        plans: next.plans,
        default_plan: next.default_plan,
        limits: next.limits,
        rate_limits: next.rate_limits,
        log: next.log,
      };
      components.reload(running);
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      await components.stop();
      logger.info('stopped');
    },
  };
}

function operatorSettingsOf(config: PosternConfig): OperatorSettings {
  const {
    plans,
    default_plan,
    policy,
    limits,
    webhooks,
    delivery,
    console,
    state_dir,
    viewer,
    listeners,
    dns,
  } = config;
  return {
    plans,
    default_plan,
    policy,
    limits,
    webhooks,
    delivery,
    console,
    state_dir,
    viewer,
    listeners,
    dns,
  };
}
