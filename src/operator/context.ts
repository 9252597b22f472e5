import type { Clock } from '../clock.js';
import type { OperatorBookkeeping, OperatorResultOf } from '../commit/operatorBookkeeping.js';
import type { PosternConfig } from '../config/load.js';
import type { Queries } from '../store/queries.js';
import type { OperatorReader } from './bulkTarget.js';

export interface Actor {
  operatorId: string;
  email: string;
}

/** In the server the index writer thread; absent (the CLI), `store` itself. A refused write rejects with an OperatorError. */
export interface OperatorWriter {
  write<W extends OperatorBookkeeping>(work: W): Promise<OperatorResultOf<W>>;
}

export type OperatorSettings = Pick<
  PosternConfig,
  | 'plans'
  | 'default_plan'
  | 'policy'
  | 'limits'
  | 'webhooks'
  | 'delivery'
  | 'console'
  | 'state_dir'
  | 'viewer'
  | 'listeners'
  | 'dns'
>;

export interface OperatorContext {
  store: Queries;
  clock: Clock;
  config: OperatorSettings;
  spoolRoot: string;
  /** Absent: the CLI (`cli` in the audit log). */
  actor?: Actor;
  clientIp?: string | null;
  writer?: OperatorWriter;
  /** A thread of their own in the server; absent: on `store`. */
  reader?: OperatorReader;
}

export const iso = (ms: number | null): string | null =>
  ms === null ? null : new Date(ms).toISOString();
