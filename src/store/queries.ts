import type Database from 'better-sqlite3';
import { type Db, sql } from './db.js';

/**
 * The store's one way to run a statement on either backend, in the SQL both speak. Rows come back as
 * SQLite gives them: integers as numbers (PostgreSQL's BIGINT too), flags 0/1, blobs as Buffers.
 */
export interface Queries {
  readonly dialect: 'sqlite' | 'postgres';
  get<Row>(text: string, ...params: Bind): Promise<Row | undefined>;
  all<Row>(text: string, ...params: Bind): Promise<Row[]>;
  run(text: string, ...params: Bind): Promise<number>;
  /** Rows read in pieces: a result larger than memory never sits whole in the process. */
  iterate<Row>(text: string, ...params: Bind): AsyncIterable<Row>;
  /** Commits together or not at all (a savepoint when nested; take them one at a time). SQLite: BEGIN IMMEDIATE. */
  transaction<T>(work: (tx: Queries) => Promise<T>): Promise<T>;
}

/** Booleans are bound as 1/0, as SQLite stores flags. */
export type SqlParam = string | number | bigint | boolean | Buffer | null;

export type Bind = SqlParam[] | [Readonly<Record<string, SqlParam | undefined>>];

function isNamed(params: Bind): params is [Readonly<Record<string, SqlParam | undefined>>] {
  const first = params[0];
  return (
    params.length === 1 && first !== null && typeof first === 'object' && !Buffer.isBuffer(first)
  );
}

type SqliteParam = string | number | bigint | Buffer | null;
const sqliteParam = (v: SqlParam | undefined): SqliteParam =>
  v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : v;

function sqliteParams(params: Bind): SqliteParam[] | [Record<string, SqliteParam>] {
  if (!isNamed(params)) return (params as SqlParam[]).map(sqliteParam);
  const named: Record<string, SqliteParam> = {};
  for (const [k, v] of Object.entries(params[0])) named[k] = sqliteParam(v);
  return [named];
}

const connections = new WeakMap<Db, Queries>();

/** Transactions are serialised per connection, so two callers' statements never interleave; one Queries per connection. */
export function sqliteQueries(db: Db): Queries {
  let q = connections.get(db);
  if (!q) {
    q = new SqliteQueries(db, { tail: Promise.resolve(), depth: 0 });
    connections.set(db, q);
  }
  return q;
}

/** For what only SQLite has (policyCache.ts); undefined on PostgreSQL. */
export function sqliteConnection(q: Queries): Db | undefined {
  return q instanceof SqliteQueries ? q.db : undefined;
}

/** The first column of the first row, or undefined: better-sqlite3's pluck() on either backend. */
export async function getValue<T>(
  q: Queries,
  text: string,
  ...params: Bind
): Promise<T | undefined> {
  const row = await q.get<Record<string, unknown>>(text, ...params);
  return row === undefined ? undefined : (firstColumn(row) as T);
}

export async function allValues<T>(q: Queries, text: string, ...params: Bind): Promise<T[]> {
  return (await q.all<Record<string, unknown>>(text, ...params)).map(
    (row) => firstColumn(row) as T,
  );
}

function firstColumn(row: Record<string, unknown>): unknown {
  for (const key in row) return row[key];
  return undefined;
}

/** `value` in the JSON array `list`; on PostgreSQL `= ANY`, which uses an index whatever the statistics say (docs/architecture.md). */
export function inJsonArray(
  q: Queries,
  value: string,
  list: string,
  as: 'text' | 'bigint' = 'text',
): string {
  if (q.dialect === 'sqlite') return `${value} IN (SELECT value FROM json_each(${list}))`;
  const values =
    as === 'bigint'
      ? `SELECT CAST(v AS BIGINT) FROM json_array_elements_text(CAST(${list} AS json)) AS t(v)`
      : `SELECT json_array_elements_text(CAST(${list} AS json))`;
  return `${value} = ANY(ARRAY(${values}))`;
}

/** SQLite's INDEXED BY hint; nothing on PostgreSQL, whose planner has no hints. */
export function indexedBy(q: Queries, index: string): string {
  return q.dialect === 'sqlite' ? `INDEXED BY ${index}` : '';
}

export async function indexAnswers(q: Queries): Promise<boolean> {
  return (await getValue<number>(q, 'SELECT 1')) === 1;
}

interface SqliteTransactionState {
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

  /** Compiled once per connection, transaction control too: a group commit runs a savepoint per unit. */
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
