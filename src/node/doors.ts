import type { Server } from 'node:http';
import os from 'node:os';
import type { Clock } from '../clock.js';
import { isConsoleListener, isDoorListener, type PosternConfig } from '../config/load.js';
import type { ConsoleServer } from '../console/server.js';
import { NodeHeartbeat } from '../housekeeping/nodeHeartbeat.js';
import { createHttpServer } from '../http/app.js';
import { ConnectionLimiter } from '../http/connectionLimit.js';
import { createPlainListener } from '../http/plainListener.js';
import { createBodyBudget } from '../http/requestBody.js';
import type { Logger } from '../log.js';
import type { MetricsExposition } from '../operator/stateMetrics.js';
import type { Readiness } from '../platform/readiness.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import { posternVersion } from '../platform/version.js';
import { createSmtpServer, type PosternSmtpServer } from '../smtp/server.js';
import { createStreamBudget } from '../smtp/streamedMessages.js';
import type { AcceptanceComponent } from './acceptanceComponent.js';
import type { AdmissionComponent } from './admissionComponents.js';
import type { BoundListener, BoundPlainListener } from './boundListener.js';
import type { CertificatesComponent } from './certificatesComponent.js';
import type { Component } from './components.js';
import type { ConsoleComponent } from './consoleComponent.js';
import { warnIfFewDescriptors } from './descriptorLimit.js';
import type { HousekeepingComponent } from './housekeepingComponent.js';
import { closeServer, listenError, listenOn } from './serverLifecycle.js';

export type DoorsSection = Pick<
  PosternConfig,
  'listeners' | 'http' | 'smtp' | 'feedback' | 'node'
> & { console: Pick<PosternConfig['console'], 'max_connections'> };

export class ListeningSockets {
  readonly servers: Server[] = [];
  readonly smtp: PosternSmtpServer[] = [];
  readonly consoles: ConsoleServer[] = [];

  down(): number {
    return (
      this.servers.filter((s) => !s.listening).length +
      this.smtp.filter((s) => !s.listening()).length
    );
  }

  smtpSessions(): number {
    return this.smtp.reduce((n, s) => n + s.openSessions(), 0);
  }
}

/** Every listener, bound in the config's order, then this process's row in `nodes`; stopping marks the row stopped first. */
export class DoorsComponent implements Component {
  readonly name = 'doors';
  readonly listeners: BoundListener[] = [];
  plain: BoundPlainListener | null = null;
  private heartbeat: NodeHeartbeat | null = null;

  constructor(
    private readonly section: DoorsSection,
    private readonly deps: {
      acceptance: AcceptanceComponent;
      admission: AdmissionComponent;
      housekeeping: HousekeepingComponent;
      console: ConsoleComponent;
      certificates: CertificatesComponent;
      sockets: ListeningSockets;
      readiness: Readiness;
      metrics: MetricsExposition | null;
      proxies: TrustedProxies;
      clock: Clock;
      logger: Logger;
    },
  ) {}

  async start(): Promise<void> {
    try {
      await this.bind();
    } catch (err) {
      await this.stop();
      throw listenError(err);
    }
  }

  async stop(): Promise<void> {
    const { sockets } = this.deps;
    await Promise.all(sockets.consoles.map((c) => c.close()));
    await Promise.all([
      ...sockets.servers.map((s) => closeServer(s)),
      ...sockets.smtp.map((s) => s.close()),
    ]);
    const heartbeat = this.heartbeat;
    this.heartbeat = null;
    await heartbeat?.stop();
  }

  private async bind(): Promise<void> {
    const { section } = this;
    const {
      acceptance,
      admission,
      housekeeping,
      console,
      certificates,
      sockets,
      readiness,
      metrics,
      proxies,
      clock,
      logger,
    } = this.deps;
    warnIfFewDescriptors(section, logger);
    const { pipeline } = acceptance;
    const { admission: admit, viewer } = admission;
    // Neither door can take the other's connections; all share one memory budget for bodies.
    const connections = new ConnectionLimiter(
      section.http.max_connections,
      section.http.max_connections_per_ip,
      proxies,
    );
    const bodyBudget = createBodyBudget(
      section.http.max_inflight_body_bytes,
      section.http.body_wait_ms,
    );
    const streams = createStreamBudget(section.smtp);
    const { listeners } = this;
    for (const listener of section.listeners) {
      let port: number;
      let scheme: string;
      if (isConsoleListener(listener)) {
        const tls = certificates.https(listener);
        const consoleServer = console.server(listener, tls, {
          bodyBudget,
          metrics,
          readiness,
          listeners: () => listeners,
        });
        sockets.consoles.push(consoleServer);
        sockets.servers.push(consoleServer.server);
        port = await listenOn(consoleServer.server, listener.port, listener.host);
        scheme = tls ? 'https' : 'http';
      } else if (!isDoorListener(listener)) {
        throw new Error(`listener ${listener.name} names no environment`);
      } else if (listener.protocol === 'http') {
        const tls = certificates.https(listener);
        const server = createHttpServer(
          {
            feedback: housekeeping.feedback,
            pipeline,
            admission: admit,
            clock,
            logger,
            config: section,
            connections,
            bodyBudget,
            proxies,
            viewer,
            readiness,
          },
          listener,
          tls,
        );
        sockets.servers.push(server);
        port = await listenOn(server, listener.port, listener.host);
        scheme = tls ? 'https' : 'http';
      } else {
        const server = createSmtpServer(
          { pipeline, admission: admit, clock, logger, config: section, streams },
          listener,
          await certificates.smtp(listener),
        );
        sockets.smtp.push(server);
        port = await server.listen();
        scheme = listener.tls === 'implicit' ? 'smtps' : 'smtp';
      }
      const hostForUrl = listener.host.includes(':') ? `[${listener.host}]` : listener.host;
      const bound: BoundListener = {
        name: listener.name,
        protocol: listener.protocol,
        environment: listener.environment,
        host: listener.host,
        port,
        url: `${scheme}://${hostForUrl}:${port}`,
      };
      listeners.push(bound);
      logger.info(bound, 'listening');
    }
    const redirect = section.http.redirect_plain;
    if (redirect) {
      const target = redirectTarget(section, listeners);
      const server = createPlainListener(
        {
          config: section,
          logger,
          connections,
          proxies,
          httpsPort: () => target.port,
          challenges: certificates.plainChallenges,
        },
        'redirect-plain',
      );
      sockets.servers.push(server);
      const port = await listenOn(server, redirect.port, redirect.host);
      this.plain = {
        host: redirect.host,
        port,
        url: `http://${redirect.host.includes(':') ? `[${redirect.host}]` : redirect.host}:${port}`,
      };
      logger.info(
        { ...this.plain, to: target.url },
        'listening (plain HTTP: redirects to HTTPS, processes nothing)',
      );
    }
    const heartbeat = new NodeHeartbeat({
      bookkeeping: housekeeping.bookkeeping,
      clock,
      logger,
      id: section.node.id,
      heartbeatSeconds: section.node.heartbeat_seconds,
      version: posternVersion(),
      hostname: os.hostname(),
      pid: process.pid,
    });
    await heartbeat.start(
      listeners.map(({ name, protocol, host, port }) => ({ name, protocol, host, port })),
    );
    this.heartbeat = heartbeat;
  }
}

function redirectTarget(
  config: Pick<PosternConfig, 'http'>,
  listeners: BoundListener[],
): BoundListener {
  const https = listeners.filter((l) => l.url.startsWith('https://'));
  const to = config.http.redirect_plain?.to;
  const target = to
    ? https.find((l) => l.name === to)
    : (https.find((l) => l.protocol === 'http' && l.environment === 'production') ??
      https.find((l) => l.protocol === 'http') ??
      https[0]);
  // The config's checks (load.ts) make this unreachable.
  if (!target) throw new Error('http.redirect_plain: no HTTPS listener to redirect to');
  return target;
}
