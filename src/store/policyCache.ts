import type { Db } from './db.js';
import { getValue, type Queries, sqliteConnection } from './queries.js';

/** Entries per kind before a cache starts over (the keys come from requests: bounded). */
const MAX_ENTRIES = 10_000;

interface GenerationCache {
  generation: number;
  kinds: Map<string, Map<string, unknown>>;
}

interface ConnectionCache extends GenerationCache {
  /** The generation was read in this turn of the event loop (reset by setImmediate)… */
  checked: boolean;
  /** …when this connection's own change count was this (its own writes are seen at once). */
  changes: number;
}

/** Per SQLite connection: every Queries on it (a transaction's too) shares its cache and its change count. */
const caches = new WeakMap<Db, ConnectionCache>();

/** Per PostgreSQL Queries (the pool's, or one transaction's own, dropped with it). */
const postgresCaches = new WeakMap<Queries, GenerationCache>();

const GENERATION = 'SELECT n FROM policy_generation WHERE id = 1';

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
 * On PostgreSQL the nodes change those rows too, so a call reads the generation first (CLUSTER.md:
 * policy changes act on the next request on every node): a key revoked or a project paused
 * through any node or the CLI is refused by this node's very next request. One primary-key read
 * of a one-row table in place of the row's own query (a join, or rows whose JSON is parsed); a
 * miss costs both. A request's reads may skip that read instead (`asOf`, policyReadGeneration):
 * then the request checks the generation they were served at against the database's in a
 * statement it sends anyway (policy/admission.ts: the rate window's take).
 */
export async function cachedPolicyRow<T>(
  q: Queries,
  kind: string,
  key: string,
  load: () => Promise<T | undefined>,
  asOf?: number,
): Promise<T | undefined> {
  const db = sqliteConnection(q);
  const cache = db
    ? await sqliteCache(q, db)
    : (asOf !== undefined && cacheAt(q, asOf)) || (await postgresCache(q));
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

/**
 * The generation a request's policy reads are served at, to pass them as `asOf`: on PostgreSQL,
 * the one this node's cache holds now when `fromCache` (no round trip: the caller must check it
 * against the database's before it acts on them), else the database's, read now. undefined on
 * SQLite, whose cache is checked once per turn of the event loop whatever the caller.
 */
export async function policyReadGeneration(
  q: Queries,
  fromCache: boolean,
): Promise<number | undefined> {
  if (sqliteConnection(q)) return undefined;
  const held = postgresCaches.get(q);
  if (fromCache && held) return held.generation;
  return (await postgresCache(q)).generation;
}

/** The cache of `q` when it holds `generation`'s rows (a row is then served without reading the generation again); else null. */
function cacheAt(q: Queries, generation: number): GenerationCache | null {
  const cache = postgresCaches.get(q);
  return cache?.generation === generation ? cache : null;
}

/**
 * The cache valid for a generation read now. A load that follows the read sees at least that
 * generation's rows, and it fills the cache of the generation its caller read (never a newer
 * one), so a request begun after a change commits is never served a row from before it: the
 * rows a cache holds are at least as new as its generation.
 * Inside a transaction the Queries is the transaction's: its uncommitted changes stay in its
 * own cache.
 */
async function postgresCache(q: Queries): Promise<GenerationCache> {
  const generation = (await getValue<number>(q, GENERATION))!;
  let cache = postgresCaches.get(q);
  if (!cache || cache.generation !== generation) {
    cache = { generation, kinds: new Map() };
    postgresCaches.set(q, cache);
  }
  return cache;
}

async function sqliteCache(q: Queries, db: Db): Promise<ConnectionCache> {
  // A connection-level counter: no page is read.
  const changes = (await getValue<number>(q, 'SELECT total_changes()'))!;
  let cache = caches.get(db);
  if (!cache?.checked || cache.changes !== changes) {
    // Once per turn of the event loop: the requests and hand-offs of one turn share the read
    // (itself a page read after every foreign commit). A change another process commits
    // meanwhile is seen from the next turn on, as if those requests had come a moment earlier;
    // this connection's own writes (an operator command run in process) at once.
    const generation = (await getValue<number>(q, GENERATION))!;
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
  return cache;
}
