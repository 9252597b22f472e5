import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AcceptPipeline } from './accept/acceptMessage.js';
import { systemClock, type Clock } from './clock.js';
import type { PosternConfig } from './config/load.js';
import { createHttpServer } from './http/app.js';
import type { Logger } from './log.js';
import { reconcileSpool } from './spool/reconcile.js';
import { Spool } from './spool/spool.js';
import { SpoolWriters } from './spool/writers.js';
import { openDatabase, type Db } from './store/db.js';
import { IndexWriter } from './store/indexWriter.js';
import { limitSettings } from './policy/usageLimits.js';
import { Admission } from './policy/admission.js';
import { pruneIdempotencyKeys } from './store/idempotency.js';

export interface BoundListener {
  name: string;
  protocol: 'http';
  environment: 'production' | 'sandbox';
  host: string;
  port: number;
  url: string;
}

export interface RunningPostern {
  listeners: BoundListener[];
  db: Db;
  pipeline: AcceptPipeline;
  close(): Promise<void>;
}

const HOUR = 3600_000;

/** Wiring: config → store → spool reconciliation → pipeline → listeners → housekeeping. */
export async function startPostern(config: PosternConfig, logger: Logger, clock: Clock = systemClock): Promise<RunningPostern> {
  const db = openDatabase(config.state_dir, logger);
  const spool = new Spool(config.state_dir);
  reconcileSpool(db, spool, logger, clock.now());
  const limits = limitSettings(config);
  const indexWriter = new IndexWriter(config.state_dir, limits, logger);
  const writers = new SpoolWriters(spool, config.spool.writer_threads, logger);
  const pipeline = new AcceptPipeline({ db, spool, writers, indexWriter, clock, logger, limits });

  const prune = () => {
    const removed = pruneIdempotencyKeys(db, clock.now(), config.retention_days);
    if (removed > 0) logger.info({ removed }, 'expired idempotency keys pruned');
  };
  prune();
  const janitor = setInterval(prune, HOUR);
  janitor.unref();

  const admission = new Admission(db, clock, config);
  const servers: Server[] = [];
  const listeners: BoundListener[] = [];
  try {
    for (const listener of config.listeners) {
      const server = createHttpServer({ db, pipeline, admission, clock, logger, config }, listener);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(listener.port, listener.host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      servers.push(server);
      const port = (server.address() as AddressInfo).port;
      const hostForUrl = listener.host.includes(':') ? `[${listener.host}]` : listener.host;
      const bound: BoundListener = { name: listener.name, protocol: listener.protocol, environment: listener.environment, host: listener.host, port, url: `http://${hostForUrl}:${port}` };
      listeners.push(bound);
      logger.info(bound, 'listening');
    }
  } catch (err) {
    await Promise.all(servers.map((s) => closeServer(s)));
    clearInterval(janitor);
    await writers.close();
    await indexWriter.close();
    db.close();
    throw err;
  }

  let closed = false;
  return {
    listeners,
    db,
    pipeline,
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(janitor);
      await Promise.all(servers.map((s) => closeServer(s)));
      await writers.close();
      await indexWriter.close();
      db.close();
      logger.info('stopped');
    },
  };
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
