import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { AcceptPipeline } from './accept/acceptMessage.js';
import { systemClock, type Clock } from './clock.js';
import { isConsoleListener, type ListenerConfig, type PosternConfig } from './config/load.js';
import { SignInThrottle } from './console/auth.js';
import { consoleShared, createConsoleServer, type ConsoleServer, type ConsoleShared } from './console/server.js';
import { KeyUseRecorder } from './operator/keyUse.js';
import { writerThrough } from './operator/writer.js';
import { createHttpServer } from './http/app.js';
import { ConnectionLimiter, MAX_PENDING_REFUSALS } from './http/connectionLimit.js';
import { createBodyBudget } from './http/requestBody.js';
import { setLogLevel, type Logger } from './log.js';
import { applyHeapGrowth } from './platform/heapGrowth.js';
import { openFileLimit } from './platform/openFileLimit.js';
import { TrustedProxies } from './platform/trustedProxies.js';
import { loadSyncFilesystem } from './spool/syncFilesystem.js';
import { reconcileSpool } from './housekeeping/reconcile.js';
import { Spool } from './spool/spool.js';
import { SpoolWriters } from './accept/writers.js';
import type { Db } from './store/db.js';
import { backendOf } from './store/backendOf.js';
import type { Queries } from './store/queries.js';
import { openNodeStore, type AcceptanceCommits } from './commit/nodeStore.js';
import { AcmeCertificates } from './tls/acmeCertificates.js';
import { certificatesReady } from './tls/certificateReadiness.js';
import { DatabaseCertificates, StateDirectoryCertificates } from './tls/certificateStorage.js';
import { listenerCertificate, smtpCertificate, type FileCertificate } from './tls/filePairs.js';
import type { ListenerTls } from './tls/httpsListener.js';
import type { ServedCertificate } from './tls/servedCertificate.js';
import { createPlainListener } from './http/plainListener.js';
import { createSmtpServer, createStreamBudget, type PosternSmtpServer } from './smtp/server.js';
import { createDelivery } from './delivery/deliveryWork.js';
import { createAdapterRegistry } from './providers/registry.js';
import { openMimeOfJob } from './providers/adapter.js';
import { dkimKeyFor, dkimSignatureFor } from './dkim/sign.js';
import { limitSettings } from './policy/usageLimits.js';
import { Admission } from './policy/admission.js';
import { RateWindowFactory } from './policy/rateWindowFactory.js';
import { Janitor } from './housekeeping/janitor.js';
import { FeedbackIntake } from './delivery/feedback.js';
import { createWebhookDispatcher } from './events/host.js';
import { viewerSecret } from './policy/viewerKey.js';
import { Viewer } from './viewer/route.js';
import { configuredViewerBase } from './operator/messageLinks.js';
import { DiskGuard } from './platform/diskSpace.js';
import { setMetricsRecording, setNodeInfo, startProcessMetrics } from './platform/metrics.js';
import { posternVersion } from './platform/version.js';
import { NodeHeartbeat } from './housekeeping/nodeHeartbeat.js';
import { Readiness } from './platform/readiness.js';
import { StorageFigures } from './operator/overview.js';
import { MetricsExposition } from './operator/stateMetrics.js';

export interface BoundListener {
  name: string;
  protocol: 'http' | 'smtp' | 'console';
  /** The environment a door serves (none for the console). */
  environment?: 'production' | 'sandbox';
  host: string;
  port: number;
  /** `http(s)://…` for HTTP and console listeners, `smtp://…` (STARTTLS) or `smtps://…` (implicit TLS) for SMTP. */
  url: string;
}

/** http.redirect_plain's listener, as bound. */
export interface BoundPlainListener {
  host: string;
  port: number;
  url: string;
}

export interface RunningPostern {
  listeners: BoundListener[];
  /** The event loop's SQLite connection: SQLite plumbing (and tests that read it directly); null on PostgreSQL. */
  db: Db | null;
  /** Its statements, as every component above the store runs them. */
  store: Queries;
  pipeline: AcceptPipeline;
  /** http.redirect_plain's listener; null without one. */
  plain: BoundPlainListener | null;
  /** tls.acme's certificate and its renewals; null without tls.acme. */
  certificates: AcmeCertificates | null;
  /**
   * Re-reads every certificate pair the config names in files (smtp.tls or the state directory's
   * self-signed one, the HTTP and console listeners' cert/key) (SIGHUP); sessions in progress keep
   * theirs. tls.acme's certificate is not a file the operator changes: it is left alone.
   */
  reloadTls(): void;
  /**
   * Applies a newly loaded config (SIGHUP): the sections that can change live (LIVE_SECTIONS)
   * take effect; the top-level sections that changed otherwise are returned as needing a restart.
   */
  reload(next: PosternConfig): ConfigReload;
  close(): Promise<void>;
}

/** What a reload changed, and what changed but waits for a restart (top-level config keys). */
export interface ConfigReload {
  changed: string[];
  restart_needed: string[];
}

/** The config's top-level keys SIGHUP applies live (docs/operations.md, "Reloading the config"). */
const LIVE_SECTIONS: readonly string[] = ['plans', 'default_plan', 'limits', 'rate_limits', 'log'];

/** Wiring: config → store → spool reconciliation → index writer → pipeline → housekeeping → listeners; each module gets the config sections it reads. */
export async function startPostern(config: PosternConfig, logger: Logger, clock: Clock = systemClock): Promise<RunningPostern> {
  applyHeapGrowth(config.memory.heap_growth_percent);
  setMetricsRecording(config.metrics.enabled);
  if (config.metrics.enabled) startProcessMetrics();
  const limits = limitSettings(config);
  // One syncfs per commit group where the addon is built; one fsync per file otherwise.
  const spoolSync = config.spool.sync === 'auto' && loadSyncFilesystem() ? 'syncfs' : 'fsync';
  // The state directory made private, its spool directories checked (a planted link or another
  // user's file: ConfigError, exit 78) before anything reads or writes there.
  const spool = new Spool(config.state_dir, logger);
  const node = await openNodeStore(config, logger, {
    limits, spoolSync, metrics: config.metrics.enabled, nodeId: config.node.id,
    // SQLite: the spool and the index agree before anything else writes (on PostgreSQL the bodies are rows).
    beforeWrites: async (index) => {
      await reconcileSpool(index, spool, logger, clock.now());
    },
  });
  if (node.backend === 'sqlite') {
    logger.info({ spool_sync: spoolSync }, spoolSync === 'syncfs' ? 'spool files flushed once per commit group (syncfs)' : 'spool files flushed one by one (fsync)');
  } else {
    // This node's scratch copies of bodies that a crash cut off: each acceptance either committed
    // its body to the database or never did, so none is needed again (reconcileSpool's twin).
    const scratch = spool.removeTempFiles();
    if (scratch.length > 0) logger.warn({ files: scratch.length }, 'removed scratch files left by an earlier run');
  }
  const { store, acceptance } = node;
  // The state directory's key on SQLite; on PostgreSQL the one every node shares (policy/viewerKey.ts).
  // Read before more threads start: a refused key file ends the start here.
  let secret: Buffer;
  try {
    secret = await viewerSecret(store, config.state_dir, logger, clock);
  } catch (err) {
    await node.close();
    throw err;
  }
  const writers = new SpoolWriters(spool, config.spool.writer_threads, config.spool.index_body_max_bytes, logger);
  // Below spool.min_free_bytes new mail is refused before the disk is full (0: no guard).
  const disk = config.spool.min_free_bytes === 0 ? null : new DiskGuard(config.state_dir, config.spool.min_free_bytes, logger);
  disk?.start();
  // A message due now wakes delivery (declared below; only called once serving).
  const onDue = config.delivery.enabled ? () => delivery.engine.kick() : undefined;
  const pipeline = new AcceptPipeline({ store, spool, writers, indexWriter: acceptance, clock, logger, limits, disk, onDue });

  // From here on, the event loop's connection only reads: what it writes (provider feedback,
  // housekeeping) goes over this channel to the index writer thread (on PostgreSQL, to the database).
  const bookkeeping = node.openBookkeeping();
  const janitor = new Janitor({ bookkeeping, spool, clock, logger, retentionDays: config.retention_days, sessionIdleSeconds: config.console.session_idle_seconds });
  await janitor.start();
  // This process's row in `nodes`, registered once its listeners are bound (below).
  const heartbeat = new NodeHeartbeat({
    bookkeeping, clock, logger, id: config.node.id, heartbeatSeconds: config.node.heartbeat_seconds, version: posternVersion(), hostname: os.hostname(), pid: process.pid,
  });
  setNodeInfo(config.node.id, posternVersion());
  const feedback = new FeedbackIntake(store, bookkeeping);

  const adapters = createAdapterRegistry({
    clock,
    apiTimeoutMs: config.delivery.api_timeout_ms,
    smtpTimeoutMs: config.delivery.smtp_timeout_ms,
    smtpPoolSize: config.delivery.smtp_pool_size,
    heloName: config.smtp.hostname ?? os.hostname(),
  });
  // Delivery's writes (leases, outcomes) go to the index writer thread, so the event loop
  // that serves both doors never waits for the write lock.
  const deliveryBookkeeping = node.openBookkeeping();
  const delivery = createDelivery({
    store: node.deliveryStore,
    bookkeeping: deliveryBookkeeping,
    nodeId: config.node.id,
    spoolRoot: spool.root,
    clock,
    logger,
    config: { delivery: config.delivery },
    adapterFor: (slug) => adapters.adapterFor(slug),
    // A large file is opened only when a key applies (most messages have none), and streamed.
    sign: async (projectId, domain, stored) =>
      (await dkimKeyFor(store, projectId, domain))
        ? dkimSignatureFor(store, projectId, domain, stored.mime ? stored.mime : openMimeOfJob(stored), new Date(clock.now()))
        : null,
  });

  // Outbound webhooks: its own thread and connection, reading the events outbox; its writes go
  // through the index writer thread (src/events/host.ts).
  const webhooks = config.webhooks.enabled
    ? createWebhookDispatcher({ location: node.location, clock, logger, config: { webhooks: config.webhooks }, nodeId: config.node.id, openBookkeepingPort: () => node.openBookkeepingPort() })
    : null;

  // Operator writes (bulk actions, API keys' last use) go to the index writer thread too.
  const operatorBookkeeping = node.openBookkeeping();
  const operatorWriter = writerThrough(async (work) => (await operatorBookkeeping.write('operator', work)).result);
  const keyUse = new KeyUseRecorder(operatorWriter, clock, logger);
  keyUse.start();
  warnIfFewDescriptors(config, logger);
  // Every sliding window of the node (send API, console sign-in, viewer): in memory on SQLite, the cluster's on PostgreSQL.
  const windows = new RateWindowFactory(store, clock, (err) => logger.warn({ err }, 'pruning the shared rate windows failed; tried again a window later'));
  const admission = new Admission(store, clock, { rate_limits: config.rate_limits, policy: config.policy }, windows, (keyId) => keyUse.note(keyId));
  // One for every console listener: failed sign-ins count per node (the cluster on PostgreSQL), not per listener.
  const signIns = new SignInThrottle(config, windows, logger);
  // Whose X-Forwarded-For names the client, on every HTTP and console listener.
  const proxies = new TrustedProxies(config.http.trusted_proxies);
  // The send API's listeners share one connection cap, the console's another (neither door can
  // take the other's connections); all of them share one memory budget for bodies.
  const connections = new ConnectionLimiter(config.http.max_connections, config.http.max_connections_per_ip, proxies);
  const consoleConnections = new ConnectionLimiter(config.console.max_connections, config.console.max_connections_per_ip, proxies);
  // Every console listener shares the live-update streams (their caps are the node's) and the activity tail.
  let consoleState: ConsoleShared | null = null;
  const bodies = createBodyBudget(config.http.max_inflight_body_bytes, config.http.body_wait_ms);
  // Every SMTP listener shares one cap on big messages streamed at once.
  const streams = createStreamBudget(config.smtp);
  const viewer = new Viewer({ ctx: { store, clock, config, spoolRoot: spool.root }, rateLimits: config.rate_limits, windows, logger, secret, proxies });
  const consoles: ConsoleServer[] = [];
  const servers: Server[] = [];
  const smtpServers: PosternSmtpServer[] = [];
  const listeners: BoundListener[] = [];
  let plain: BoundPlainListener | null = null;
  // Certificates: the SMTP listeners' pair (loaded with the first SMTP listener that uses it),
  // the HTTP and console listeners' own pairs, tls.acme's; `served`, every one a listener serves.
  let smtpPair: FileCertificate | null = null;
  const filePairs: FileCertificate[] = [];
  const served: ServedCertificate[] = [];
  let acme: AcmeCertificates | null = null;
  const readiness = readinessChecks({ pipeline, indexWriter: acceptance, disk, servers, smtpServers }).add('certificates', () =>
    certificatesReady(served, clock.now(), acme),
  );
  const metrics = config.metrics.enabled
    ? new MetricsExposition({
        store,
        now: () => clock.now(),
        storage: new StorageFigures(store, config.state_dir, METRICS_SPOOL_TTL_MS),
        disk,
        throttledAccounts: () => delivery.handOffs.throttledAccounts(),
        smtpSessions: () => smtpServers.reduce((n, s) => n + s.openSessions(), 0),
        consoleStreams: () => consoleState?.live.figures() ?? { open: 0, queuedPeakBytes: 0 },
        threadSnapshots: async () => [await acceptance.metrics()],
      })
    : null;
  const shutdown = async () => {
    await acme?.stop();
    await Promise.all(consoles.map((c) => c.close()));
    await Promise.all([...servers.map((s) => closeServer(s)), ...smtpServers.map((s) => s.close())]);
    // No longer serving: say so before the rest winds down.
    await heartbeat.stop();
    await windows.settled();
    await keyUse.stop();
    operatorBookkeeping.close();
    await delivery.engine.stop();
    deliveryBookkeeping.close();
    await webhooks?.stop();
    await adapters.close();
    await janitor.stop();
    bookkeeping.close();
    await writers.close();
    disk?.stop();
    await node.close();
  };
  try {
    // The first spool writer thread has loaded its modules (it started with the writers, above):
    // a node that listens before then makes its first messages wait for it.
    await writers.ready();
    if (config.tls.acme) {
      // On PostgreSQL the nodes share the certificate (and take turns ordering it).
      const storage = backendOf(store).capabilities.sharedCertificates ? new DatabaseCertificates(store, config.node.id) : new StateDirectoryCertificates(config.state_dir);
      acme = await AcmeCertificates.open({ settings: config.tls.acme, storage, clock, logger });
    }
    /** An HTTP or console listener's TLS: tls.acme's certificate, its own pair, or none (plain HTTP). */
    const httpsOf = (l: { name: string; cert: string | null; key: string | null; acme: boolean }): ListenerTls | null => {
      if (l.acme && acme) {
        served.push(acme.certificate);
        return { certificate: acme.certificate, challenges: config.tls.acme?.challenge === 'tls-alpn-01' ? acme.challenges : null };
      }
      if (!l.cert || !l.key) return null;
      const pair = listenerCertificate(l);
      filePairs.push(pair);
      served.push(pair.certificate);
      return { certificate: pair.certificate };
    };
    for (const listener of config.listeners) {
      let port: number;
      let scheme: string;
      // Not a console: the schema requires an environment of every http and smtp listener.
      const door = listener as ListenerConfig;
      if (isConsoleListener(listener)) {
        consoleState ??= consoleShared({ store, clock, logger, config, spoolRoot: spool.root });
        const tls = httpsOf(listener);
        const consoleServer = createConsoleServer(
          {
            store, clock, logger, config, spoolRoot: spool.root, writer: operatorWriter, keyUse, connections: consoleConnections, bodies, proxies, signIns, shared: consoleState,
            throttledUntil: (id) => delivery.handOffs.accountThrottledUntil(id), metrics, readiness,
            viewerLinks: { secret, base: () => viewerBase(config, listeners) },
            doors: () => ({
              production: listeners.find((l) => l.protocol === 'http' && l.environment === 'production')?.url ?? null,
              sandbox: listeners.find((l) => l.protocol === 'http' && l.environment === 'sandbox')?.url ?? null,
            }),
          },
          listener,
          tls,
        );
        consoles.push(consoleServer);
        servers.push(consoleServer.server);
        port = await listenOn(consoleServer.server, listener.port, listener.host);
        scheme = tls ? 'https' : 'http';
      } else if (listener.protocol === 'http') {
        const tls = httpsOf(listener);
        const server = createHttpServer({ feedback, pipeline, admission, clock, logger, config, connections, bodies, proxies, viewer, readiness }, door, tls);
        servers.push(server);
        port = await listenOn(server, listener.port, listener.host);
        scheme = tls ? 'https' : 'http';
      } else {
        let certificate: ServedCertificate;
        if (listener.acme && acme) certificate = acme.certificate;
        else certificate = (smtpPair ??= await smtpCertificate(config, logger)).certificate;
        served.push(certificate);
        const server = createSmtpServer({ pipeline, admission, clock, logger, config, streams }, door, certificate);
        smtpServers.push(server);
        port = await server.listen();
        scheme = listener.tls === 'implicit' ? 'smtps' : 'smtp';
      }
      const hostForUrl = listener.host.includes(':') ? `[${listener.host}]` : listener.host;
      const bound: BoundListener = { name: listener.name, protocol: listener.protocol, environment: listener.environment, host: listener.host, port, url: `${scheme}://${hostForUrl}:${port}` };
      listeners.push(bound);
      logger.info(bound, 'listening');
    }
    const redirect = config.http.redirect_plain;
    if (redirect) {
      const target = redirectTarget(config, listeners);
      const server = createPlainListener(
        { config, logger, connections, proxies, httpsPort: () => target.port, challenges: config.tls.acme?.challenge === 'http-01' ? (acme?.challenges ?? null) : null },
        'redirect-plain',
      );
      servers.push(server);
      const port = await listenOn(server, redirect.port, redirect.host);
      plain = { host: redirect.host, port, url: `http://${redirect.host.includes(':') ? `[${redirect.host}]` : redirect.host}:${port}` };
      logger.info({ ...plain, to: target.url }, 'listening (plain HTTP: redirects to HTTPS, processes nothing)');
    }
    // The listeners that answer the CA's challenges are up: the first certificate can be ordered.
    acme?.start();
    await heartbeat.start(listeners.map(({ name, protocol, host, port }) => ({ name, protocol, host, port })));
  } catch (err) {
    await shutdown();
    throw listenError(err);
  }
  // From here on this connection only reads: every write goes through the index writer thread.
  // A write here would wait on busy_timeout whenever the writer holds the lock (both doors with
  // it), so SQLite refuses one outright (SQLITE_READONLY) rather than let it slip in.
  node.sqlite?.pragma('query_only = 1');
  if (config.delivery.enabled) delivery.engine.start();
  webhooks?.start();

  let closed = false;
  return {
    listeners,
    db: node.sqlite,
    store,
    pipeline,
    plain,
    certificates: acme,
    reloadTls() {
      const failed: string[] = [];
      for (const pair of [...(smtpPair ? [smtpPair] : []), ...filePairs]) {
        try {
          pair.reload();
          logger.info({ certificate: pair.certificate.name, cert: pair.certPath }, 'TLS certificate reloaded');
        } catch (err) {
          failed.push(`${pair.certificate.name}: ${(err as Error).message}`);
        }
      }
      if (failed.length > 0) throw new Error(`kept the current certificate of ${failed.join('; ')}`);
    },
    reload(next) {
      const result: ConfigReload = { changed: [], restart_needed: [] };
      const current = config as unknown as Record<string, unknown>;
      const incoming = next as unknown as Record<string, unknown>;
      for (const key of new Set([...Object.keys(current), ...Object.keys(incoming)])) {
        if (JSON.stringify(current[key]) === JSON.stringify(incoming[key])) continue;
        (LIVE_SECTIONS.includes(key) ? result.changed : result.restart_needed).push(key);
      }
      if (result.changed.length === 0) return result;
      // The running config is one object every module reads from: its live sections are replaced
      // in place. What was copied at start (the limits, the rate-limit windows, the level) is set again.
      for (const key of result.changed) current[key] = incoming[key];
      Object.assign(limits, limitSettings(config));
      acceptance.updateLimits(limits);
      // Only a change of rate_limits makes new windows: any other reload keeps what they counted.
      if (result.changed.includes('rate_limits')) {
        admission.updateRateLimits(config.rate_limits);
        viewer.updateRateLimits(config.rate_limits);
      }
      if (result.changed.includes('log')) {
        const level = process.env.POSTERN_LOG_LEVEL || config.log.level;
        setLogLevel(logger, level);
        webhooks?.setLogLevel(level);
      }
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      await shutdown();
      logger.info('stopped');
    },
  };
}

/** Where viewer links point: `viewer.base_url`, else the first production HTTP listener as bound. */
function viewerBase(config: PosternConfig, listeners: BoundListener[]): string {
  const door = listeners.find((l) => l.protocol === 'http' && l.environment === 'production') ?? listeners.find((l) => l.protocol === 'http');
  return config.viewer.base_url ?? door?.url ?? configuredViewerBase(config) ?? '';
}

/** The HTTPS listener http.redirect_plain points to: `to`, else the first production HTTP listener with TLS, else any HTTPS one. */
function redirectTarget(config: PosternConfig, listeners: BoundListener[]): BoundListener {
  const https = listeners.filter((l) => l.url.startsWith('https://'));
  const to = config.http.redirect_plain?.to;
  const target = to ? https.find((l) => l.name === to) : (https.find((l) => l.protocol === 'http' && l.environment === 'production') ?? https.find((l) => l.protocol === 'http') ?? https[0]);
  // The config's checks (load.ts) make this unreachable.
  if (!target) throw new Error('http.redirect_plain: no HTTPS listener to redirect to');
  return target;
}

/** The spool's size for /metrics is counted (a scan of every message row, in steps) at most this often. */
const METRICS_SPOOL_TTL_MS = 60_000;
/** The index writer thread is stalled when it does not answer within this (it answers between groups). */
const WRITER_ANSWER_MS = 2000;

/**
 * GET /readyz: the index reads and its writer's last write succeeded, the writer thread answers,
 * the disk is above its guard, and every listener is bound (the wiring adds `certificates`:
 * every TLS listener has a valid certificate).
 */
function readinessChecks(parts: { pipeline: AcceptPipeline; indexWriter: AcceptanceCommits; disk: DiskGuard | null; servers: Server[]; smtpServers: PosternSmtpServer[] }): Readiness {
  const { pipeline, indexWriter, disk, servers, smtpServers } = parts;
  return new Readiness()
    .add('index_writable', async () => {
      if (!(await pipeline.indexAnswers())) return { ok: false, detail: 'the index does not answer a query' };
      const status = await indexWriter.status(WRITER_ANSWER_MS);
      if (status?.lastWriteError) return { ok: false, detail: `the last write to the index failed: ${status.lastWriteError}` };
      return { ok: true };
    })
    .add('writer_thread', async () =>
      (await indexWriter.status(WRITER_ANSWER_MS)) ? { ok: true } : { ok: false, detail: `the index writer thread did not answer within ${WRITER_ANSWER_MS} ms` },
    )
    .add('disk', () => {
      if (!disk) return { ok: true, detail: 'no guard (spool.min_free_bytes: 0)' };
      const { free_bytes: free, min_free_bytes: min } = disk.state;
      return disk.low ? { ok: false, detail: `${free} bytes free, below spool.min_free_bytes (${min}): new mail is refused` } : { ok: true };
    })
    .add('listeners', () => {
      const down = servers.filter((s) => !s.listening).length + smtpServers.filter((s) => !s.listening()).length;
      return down === 0 ? { ok: true } : { ok: false, detail: `${down} listener(s) not accepting connections` };
    });
}

/** Listens; resolves with the bound port (port 0 picks one). */
function listenOn(server: Server, port: number, host: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Descriptors the process holds besides client connections: index, spool files, listeners, threads. */
const BASE_DESCRIPTORS = 100;

/**
 * The caps on connections bound the descriptors clients can take only if the process may open
 * that many: say so at start when `ulimit -n` is lower than the caps allow.
 */
function warnIfFewDescriptors(config: PosternConfig, logger: Logger): void {
  const limit = openFileLimit();
  const smtp = config.listeners.some((l) => l.protocol === 'smtp') ? config.smtp.max_clients : 0;
  const consoles = config.listeners.some((l) => l.protocol === 'console') ? config.console.max_connections + MAX_PENDING_REFUSALS : 0;
  const needed = config.http.max_connections + MAX_PENDING_REFUSALS + consoles + smtp + BASE_DESCRIPTORS;
  if (limit !== null && limit < needed) {
    logger.warn(
      { open_file_limit: limit, needed, http_max_connections: config.http.max_connections, console_max_connections: consoles === 0 ? 0 : config.console.max_connections, smtp_max_clients: smtp },
      'the open-file limit (ulimit -n) is below what the connection caps allow: raise it, or lower http.max_connections / console.max_connections / smtp.max_clients',
    );
  }
}

/** A port below 1024 without the privilege to bind it is the common first-start failure: say so. */
function listenError(err: unknown): unknown {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e.code === 'EACCES' && typeof e.port === 'number' && e.port < 1024) {
    return new Error(
      `cannot listen on ${e.address}:${e.port}: ports below 1024 need root or CAP_NET_BIND_SERVICE; change the port in the config or set ${'POSTERN_LISTEN_<NAME>'}=host:port`,
    );
  }
  return err;
}

const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Stops accepting connections and lets in-flight requests finish. Keep-alive clients that
 * keep sending are answered once more with `Connection: close`; whatever is still open after
 * the grace period is cut (its request was never acknowledged, so nothing is lost).
 */
function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
    force.unref();
    server.on('request', (_req, res: ServerResponse) => res.setHeader('Connection', 'close'));
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
