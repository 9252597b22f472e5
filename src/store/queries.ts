import type Database from 'better-sqlite3';
import { sql, type Db } from './db.js';

/**
 * The store's one way to run a statement, on either backend (CLUSTER.md: "everything above the
 * store is the same code"). A store function takes `Queries` and is written once, in the SQL
 * both engines speak: `?` or `@name` placeholders, the same table and column names (the two
 * dialects' migrations are kept equal by test/store/postgres-schema.test.ts). Where the engines
 * differ (a lease's row locks, an upsert's spelling), the function asks `dialect`.
 *
 * Rows come back as SQLite gives them: integers as numbers (PostgreSQL's BIGINT included, which
 * pg hands out as strings), flags as 0/1, text as strings, blobs as Buffers.
 */
export interface Queries {
  readonly dialect: 'sqlite' | 'postgres';
  /** The first row, or undefined. */
  get<Row>(text: string, ...params: Bind): Promise<Row | undefined>;
  all<Row>(text: string, ...params: Bind): Promise<Row[]>;
  /** Runs a write; resolves with how many rows it changed. */
  run(text: string, ...params: Bind): Promise<number>;
  /**
   * The rows one at a time, read in pieces: a result far larger than memory (a scan of every
   * message) never sits whole in the process.
   */
  iterate<Row>(text: string, ...params: Bind): AsyncIterable<Row>;
  /**
   * `work`'s statements commit together or not at all (a savepoint when already in one). On
   * SQLite the transaction takes the write lock at once (BEGIN IMMEDIATE); transactions on one
   * connection run one after another. Savepoints inside one transaction are taken one at a
   * time (await each; never several at once).
   */
  transaction<T>(work: (tx: Queries) => Promise<T>): Promise<T>;
}

/** A value a statement binds. Booleans are bound as 1/0, as SQLite stores flags. */
export type SqlParam = string | number | bigint | boolean | Buffer | null;

/** Positional parameters (`?`), or one object naming them (`@name`). */
export type Bind = SqlParam[] | [Readonly<Record<string, SqlParam | undefined>>];

function isNamed(params: Bind): params is [Readonly<Record<string, SqlParam | undefined>>] {
  const first = params[0];
  return params.length === 1 && first !== null && typeof first === 'object' && !Buffer.isBuffer(first);
}

type SqliteParam = string | number | bigint | Buffer | null;
const sqliteParam = (v: SqlParam | undefined): SqliteParam => (v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : v);

/** SQLite binds named parameters from an object whose keys are the names without `@`. */
function sqliteParams(params: Bind): SqliteParam[] | [Record<string, SqliteParam>] {
  if (!isNamed(params)) return (params as SqlParam[]).map(sqliteParam);
  const named: Record<string, SqliteParam> = {};
  for (const [k, v] of Object.entries(params[0])) named[k] = sqliteParam(v);
  return [named];
}

const connections = new WeakMap<Db, Queries>();

/**
 * Queries on a better-sqlite3 connection. Each statement runs synchronously, as it always has;
 * the promise only lets the same store code serve PostgreSQL. Transactions are serialised per
 * connection: a second one waits for the first to end, so two callers' statements never
 * interleave inside one BEGIN … COMMIT. One Queries per connection (the same one each call),
 * so that every caller shares that order.
 */
export function sqliteQueries(db: Db): Queries {
  let q = connections.get(db);
  if (!q) {
    q = new SqliteQueries(db, { tail: Promise.resolve(), depth: 0 });
    connections.set(db, q);
  }
  return q;
}

/** The better-sqlite3 connection under `q`; undefined on PostgreSQL. For what only SQLite has (policyCache.ts). */
export function sqliteConnection(q: Queries): Db | undefined {
  return q instanceof SqliteQueries ? q.db : undefined;
}

/**
 * The first column of the first row (a COUNT, a MAX, one column looked up), or undefined when
 * there is no row: better-sqlite3's pluck(), on either backend.
 */
export async function getValue<T>(q: Queries, text: string, ...params: Bind): Promise<T | undefined> {
  const row = await q.get<Record<string, unknown>>(text, ...params);
  return row === undefined ? undefined : (firstColumn(row) as T);
}

/** The first column of every row. */
export async function allValues<T>(q: Queries, text: string, ...params: Bind): Promise<T[]> {
  return (await q.all<Record<string, unknown>>(text, ...params)).map((row) => firstColumn(row) as T);
}

function firstColumn(row: Record<string, unknown>): unknown {
  for (const key in row) return row[key];
  return undefined;
}

/**
 * `value` is one of the values of the JSON array `list` (a parameter, `?` or `@name`, or a
 * column), compared as text or as BIGINT: `${inJsonArray(q, 'id', '?')}`. SQLite: IN json_each.
 * PostgreSQL: = ANY of the array built once, which reaches each value by an index whatever the
 * planner's statistics say (an IN subquery was planned as a nested loop over a table the
 * statistics thought empty: 2.5 s for 500 ids among 10,000 rows).
 */
export function inJsonArray(q: Queries, value: string, list: string, as: 'text' | 'bigint' = 'text'): string {
  if (q.dialect === 'sqlite') return `${value} IN (SELECT value FROM json_each(${list}))`;
  const values = as === 'bigint' ? `SELECT CAST(v AS BIGINT) FROM json_array_elements_text(CAST(${list} AS json)) AS t(v)` : `SELECT json_array_elements_text(CAST(${list} AS json))`;
  return `${value} = ANY(ARRAY(${values}))`;
}

/** SQLite's INDEXED BY hint (the planner kept to an index it would otherwise miss); nothing on PostgreSQL, whose planner has no hints. */
export function indexedBy(q: Queries, index: string): string {
  return q.dialect === 'sqlite' ? `INDEXED BY ${index}` : '';
}

/** Whether the index answers a query at all (the health check). */
export async function indexAnswers(q: Queries): Promise<boolean> {
  return (await getValue<number>(q, 'SELECT 1')) === 1;
}

interface SqliteTransactionState {
  /** Resolves when the transaction in progress (if any) has ended. */
  tail: Promise<void>;
  depth: number;
}

class SqliteQueries implements Queries {
  readonly dialect = 'sqlite' as const;

  constructor(
    readonly db: Db,
    private readonly state: SqliteTransactionState,
    private readonly inTransaction = false,
  ) {}

  /** Compiled once per connection (db.ts), transaction control too: a group commit runs a savepoint per unit. */
  private stmt(text: string): Database.Statement {
    return sql(this.db, text);
  }

  async get<Row>(text: string, ...params: Bind): Promise<Row | undefined> {
    return this.stmt(text).get(...sqliteParams(params)) as Row | undefined;
  }

  async all<Row>(text: string, ...params: Bind): Promise<Row[]> {
    return this.stmt(text).all(...sqliteParams(params)) as Row[];
  }

  async run(text: string, ...params: Bind): Promise<number> {
    return this.stmt(text).run(...sqliteParams(params)).changes;
  }

  async *iterate<Row>(text: string, ...params: Bind): AsyncIterable<Row> {
    // better-sqlite3's iterator reads row by row; the connection is busy until it ends.
    for (const row of this.stmt(text).iterate(...sqliteParams(params))) yield row as Row;
  }

  async transaction<T>(work: (tx: Queries) => Promise<T>): Promise<T> {
    if (this.inTransaction) return this.savepoint(work);
    const previous = this.state.tail;
    let done!: () => void;
    this.state.tail = new Promise<void>((resolve) => (done = resolve));
    await previous;
    try {
      this.stmt('BEGIN IMMEDIATE').run();
      try {
        const result = await work(new SqliteQueries(this.db, this.state, true));
        this.stmt('COMMIT').run();
        return result;
      } catch (err) {
        if (this.db.inTransaction) this.stmt('ROLLBACK').run();
        throw err;
      }
    } finally {
      done();
    }
  }

  private async savepoint<T>(work: (tx: Queries) => Promise<T>): Promise<T> {
    const name = `sp${++this.state.depth}`;
    this.stmt(`SAVEPOINT ${name}`).run();
    try {
      const result = await work(this);
      this.stmt(`RELEASE ${name}`).run();
      return result;
    } catch (err) {
      this.stmt(`ROLLBACK TO ${name}`).run();
      this.stmt(`RELEASE ${name}`).run();
      throw err;
    } finally {
      this.state.depth -= 1;
    }
  }
}
