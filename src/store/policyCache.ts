import type { Db } from './db.js';
import { getValue, sqliteConnection, type Queries } from './queries.js';

/** Entries per kind before a cache starts over (the keys come from requests: bounded). */
const MAX_ENTRIES = 10_000;

interface ConnectionCache {
  generation: number;
  kinds: Map<string, Map<string, unknown>>;
  /** The generation was read in this turn of the event loop (reset by setImmediate)… */
  checked: boolean;
  /** …when this connection's own change count was this (its own writes are seen at once). */
  changes: number;
}

/** Per SQLite connection: every Queries on it (a transaction's too) shares its cache and its change count. */
const caches = new WeakMap<Db, ConnectionCache>();

/**
 * Rows that change only by an operator's action (API keys, projects, provider accounts, DKIM
 * keys), served from memory per connection. Triggers move `policy_generation` on any change to
 * those tables, made by any process (the server, the CLI). That one-row table is read once per
 * turn of the event loop, and again after this connection's own writes; when it moved the
 * cache is dropped, so a revoked key or a detached account counts from the next turn on. The
 * queries this replaces reread their B-tree pages on every request: each commit by another
 * connection (the index writer's, every few milliseconds) empties this connection's page cache.
 *
 * `load` returning undefined is not cached (an unknown API key stays a query each time).
 * Cached values are shared: callers must not change them.
 *
 * SQLite only: the own-writes check is SQLite's total_changes(). On PostgreSQL (not wired yet,
 * issue 23) every call loads; how nodes see each other's policy changes comes with that step.
 */
export async function cachedPolicyRow<T>(q: Queries, kind: string, key: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
  const db = sqliteConnection(q);
  if (!db) return load();
  // A connection-level counter: no page is read.
  const changes = (await getValue<number>(q, 'SELECT total_changes()'))!;
  let cache = caches.get(db);
  if (!cache?.checked || cache.changes !== changes) {
    // Once per turn of the event loop: the requests and hand-offs of one turn share the read
    // (itself a page read after every foreign commit). A change another process commits
    // meanwhile is seen from the next turn on, as if those requests had come a moment earlier;
    // this connection's own writes (an operator command run in process) at once.
    const generation = (await getValue<number>(q, 'SELECT n FROM policy_generation WHERE id = 1'))!;
    cache = caches.get(db);
    if (!cache || cache.generation !== generation) {
      cache = { generation, kinds: new Map(), checked: false, changes };
      caches.set(db, cache);
    }
    cache.checked = true;
    cache.changes = changes;
    const checked = cache;
    setImmediate(() => (checked.checked = false));
  }
  let entries = cache.kinds.get(kind);
  if (!entries) {
    entries = new Map();
    cache.kinds.set(kind, entries);
  }
  if (entries.has(key)) return entries.get(key) as T;
  const value = await load();
  if (value === undefined) return undefined;
  if (entries.size >= MAX_ENTRIES) entries.clear();
  entries.set(key, value);
  return value;
}
