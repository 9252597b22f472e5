import { createRequire } from 'node:module';
import type pg from 'pg';

let driver: typeof pg | undefined;

/**
 * The pg driver, loaded when a PostgreSQL store is first used. A node on SQLite never loads
 * it: every isolate that imports the store (the event loop, the index writer's and the webhook
 * dispatcher's threads) would otherwise carry about 2.6 MiB of heap and 1.7 MiB beside it for
 * a driver it never calls (the 100,000-message queue bench's peak RSS has little to spare).
 */
export function pgDriver(): typeof pg {
  driver ??= createRequire(import.meta.url)('pg') as typeof pg;
  return driver;
}
