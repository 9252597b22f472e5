import type { Pool } from 'pg';
import {
  finishSending,
  type HandOffEnd,
  type LeasedMessage,
  leaseDueMessagesShared,
} from '../delivery.js';
import { postgresQueries } from './queries.js';

/**
 * Delivery leases on PostgreSQL, shared by several nodes, on a pool: the statements are
 * store/delivery.ts's (leaseDueMessages and finishSending on PostgreSQL, which the scheduler
 * runs through Queries); these serve the tests and tools that hold a pool.
 */

export type { LeasedMessage };

export interface LeaseRequest {
  /** The leasing node's id (node.id): recorded as the lease's owner. */
  node: string;
  now: number;
  leaseUntil: number;
  limit: number;
}

/** leaseDueMessages on PostgreSQL (store/delivery.ts): concurrent nodes never take the same message. */
export async function leaseDueMessagesPostgres(
  pool: Pool,
  request: LeaseRequest,
): Promise<LeasedMessage[]> {
  return leaseDueMessagesShared(postgresQueries(pool), request);
}

export interface HandOffFinish extends HandOffEnd {
  id: string;
  /** The node that leased the message: only its lease may end it. */
  node: string;
  now: number;
}

/** finishSending on PostgreSQL: moves the message only while it is `sending` and leased by `node`. */
export async function finishHandOffPostgres(pool: Pool, finish: HandOffFinish): Promise<boolean> {
  const { id, node, now, ...to } = finish;
  return finishSending(postgresQueries(pool), id, to, now, node);
}
