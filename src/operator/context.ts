import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Db } from '../store/db.js';

/** The sections of the config operator operations read. */
export type OperatorSettings = Pick<PosternConfig, 'plans' | 'default_plan' | 'policy' | 'limits' | 'webhooks'>;

/** What every operator operation needs: the index, the one clock and the config sections it reads. */
export interface OperatorContext {
  db: Db;
  clock: Clock;
  config: OperatorSettings;
  spoolRoot: string;
}

export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
