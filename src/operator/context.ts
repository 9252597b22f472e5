import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Db } from '../store/db.js';

/** What every operator operation needs: the index, the one clock and the config. */
export interface OperatorContext {
  db: Db;
  clock: Clock;
  config: PosternConfig;
  spoolRoot: string;
}

export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
