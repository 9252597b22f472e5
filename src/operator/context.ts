import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { OperatorBookkeeping, OperatorResultOf } from '../commit/operatorBookkeeping.js';
import type { Queries } from '../store/queries.js';
import type { OperatorReader } from './bulkTarget.js';

/** Who acts, for the audit log: a signed-in operator (console), else the CLI on the server. */
export interface Actor {
  operatorId: string;
  email: string;
}

/**
 * Where the operator layer's writes run, each one transaction (src/operator/writer.ts): in the
 * server the index writer thread; absent (the CLI, its own process), on `store` itself. A write
 * the index refuses (not found, conflict) rejects with an OperatorError.
 */
export interface OperatorWriter {
  write<W extends OperatorBookkeeping>(work: W): Promise<OperatorResultOf<W>>;
}

/**
 * The sections of the config operator operations read (`delivery`: the connection check's
 * timeouts; `console`: session expiry; `state_dir`: the overview's disk figures; `viewer` and
 * `listeners`: viewer links' expiry and, for the CLI, where they point; `dns`: a domain check's
 * resolvers).
 */
export type OperatorSettings = Pick<PosternConfig, 'plans' | 'default_plan' | 'policy' | 'limits' | 'webhooks' | 'delivery' | 'console' | 'state_dir' | 'viewer' | 'listeners' | 'dns'>;

/** What every operator operation needs: the index, the one clock and the config sections it reads. */
export interface OperatorContext {
  store: Queries;
  clock: Clock;
  config: OperatorSettings;
  spoolRoot: string;
  /** Absent: the CLI (`cli` in the audit log). */
  actor?: Actor;
  /** The client's address, for the audit log (console requests). */
  clientIp?: string | null;
  writer?: OperatorWriter;
  /** Where the server reads a bulk action's candidates (a thread of their own); absent: on `store`. */
  reader?: OperatorReader;
}

export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
