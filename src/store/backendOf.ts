import type { StoreBackend } from './backend.js';
import { postgresBackend } from './postgres/backend.js';
import type { Queries } from './queries.js';
import { sqliteBackend } from './sqlite/backend.js';

/**
 * The seams of the backend `q` was opened on (store/backend.ts). A connection belongs to one
 * backend for its life (store/open.ts chooses it from the config), so this is that choice read
 * back, not a new one: the layers above call it and never compare backends themselves.
 */
export function backendOf(q: Queries): StoreBackend {
  return q.dialect === 'postgres' ? postgresBackend : sqliteBackend;
}
