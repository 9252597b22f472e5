import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { Logger } from '../../log.js';
import { pgDriver } from './driver.js';

/**
 * A connection that cannot be opened within this fails its query (the request is answered an
 * error) instead of waiting on the network: a failover to an address that drops packets would
 * otherwise hold every request for the kernel's connect timeout, minutes. It also bounds a wait
 * for a free connection of a busy pool, which takes milliseconds even under the benches' load.
 */
const CONNECT_TIMEOUT_MS = 10_000;

/** TCP keepalive on every connection: one whose server vanished without a word (a host failed over) is found dead and closed. */
const KEEPALIVE_DELAY_MS = 10_000;

/** Connections cut together (a restart cuts all of them) are logged once per this long, with how many. */
const LOSS_LOG_PERIOD_MS = 10_000;

export interface PoolOptions {
  /** The process's name for the pool, in its log lines and as the connections' application_name (`postern <name>`). */
  name: string;
  /**
   * A connection once opened stays open while idle, instead of pg's closing it after 10 s. A
   * burst after a quiet spell then finds the pool open rather than opening most of it at once:
   * measured on the 2-core VM, 50 clients after 12 s of quiet got 2 answers in their first
   * 250 ms from a node whose pool had shrunk to 2 connections, 30–45 from one that kept 20.
   */
  keepOpen?: boolean;
}

/**
 * A pool whose connections may be cut at any moment (a database restart or failover, an idle
 * timeout, an administrator's pg_terminate_backend) without taking the process down.
 *
 * pg reports a cut connection as an 'error' event on its client, and an EventEmitter's 'error'
 * with no listener throws: the pool listens on its idle clients only, so a cut of a client that
 * is checked out (a transaction between two statements, a cursor between two fetches, an
 * acceptance group reading its body) ended the process. Every client gets a listener of its own
 * as it opens: its holder then sees the cut as its statement's error (or its next one's), and
 * pg-pool drops the dead client when it is given back; the next query opens a new connection.
 */
export function openPool(url: string, max: number, logger: Logger, opts: PoolOptions): pg.Pool {
  const pool = new (pgDriver().Pool)({
    connectionString: url,
    max,
    min: opts.keepOpen ? max : 0,
    application_name: `postern ${opts.name}`,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
  } as pg.PoolConfig);
  const lost = lossLog(logger, opts.name);
  pool.on('connect', (client) => client.on('error', lost));
  // The same error, re-emitted by the pool for an idle client: reported once, by the client's listener.
  pool.on('error', () => undefined);
  return pool;
}

/** Logs cut connections: the first of a burst at once, the rest counted into the next line a period later. */
function lossLog(logger: Logger, name: string): (err: Error) => void {
  let lastLoggedAt = -Infinity;
  let unlogged = 0;
  return (err) => {
    const at = performance.now();
    if (at - lastLoggedAt < LOSS_LOG_PERIOD_MS) {
      unlogged++;
      return;
    }
    logger.warn(
      { err: err.message, pool: name, cut_since_last_line: unlogged },
      'a PostgreSQL connection was cut (the database restarting or failing over?); queries open new ones',
    );
    lastLoggedAt = at;
    unlogged = 0;
  };
}

/**
 * Opens `count` connections of `pool` at once (nothing else uses it yet) and gives them back
 * idle, so a node's first requests do not wait behind connection set-up, 20 at once. All
 * that opened are given back either way; the first failure is thrown.
 */
export async function openPoolConnections(pool: pg.Pool, count: number): Promise<void> {
  const opened = await Promise.allSettled(Array.from({ length: count }, () => pool.connect()));
  for (const o of opened) if (o.status === 'fulfilled') o.value.release();
  const failed = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) throw failed.reason;
}
