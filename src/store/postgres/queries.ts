import type pg from 'pg';
import type { Bind, Queries, SqlParam } from '../queries.js';
import { bigintNumber } from './bigintNumber.js';
import { pgDriver } from './driver.js';

/**
 * Queries on PostgreSQL (a pg Pool), for the store code written once for both backends
 * (../queries.ts). The SQL is SQLite's placeholder style, rewritten to `$n` once per text;
 * rows come back in SQLite's shapes (see below).
 */
export function postgresQueries(pool: pg.Pool): Queries {
  return new PostgresQueries(pool, null);
}

/** The text with `?` and `@name` placeholders numbered `$1…`, and the order names bind in. */
interface Translated {
  text: string;
  /** null: positional (`?`); else the name each `$n` binds. */
  names: string[] | null;
}

const translations = new Map<string, Translated>();

/**
 * Rewrites placeholders outside string literals, quoted identifiers and comments. A name used
 * twice binds one parameter. Mixing `?` and `@name` in one statement is refused: neither engine
 * would read it the way its author meant.
 */
export function translatePlaceholders(text: string): Translated {
  const cached = translations.get(text);
  if (cached) return cached;
  let out = '';
  let positional = 0;
  const names: string[] = [];
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    if (c === "'" || c === '"') {
      const end = closingQuote(text, i, c);
      out += text.slice(i, end);
      i = end;
    } else if (c === '-' && text[i + 1] === '-') {
      const end = text.indexOf('\n', i);
      const stop = end === -1 ? text.length : end;
      out += text.slice(i, stop);
      i = stop;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end === -1 ? text.length : end + 2;
      out += text.slice(i, stop);
      i = stop;
    } else if (c === '?') {
      positional += 1;
      out += `$${positional}`;
      i += 1;
    } else if (c === '@' && /[A-Za-z_]/.test(text[i + 1] ?? '')) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i + 1))!;
      let n = names.indexOf(m[0]);
      if (n === -1) n = names.push(m[0]) - 1;
      out += `$${n + 1}`;
      i += 1 + m[0].length;
    } else {
      out += c;
      i += 1;
    }
  }
  if (positional > 0 && names.length > 0)
    throw new Error(`a statement mixes ? and @name placeholders: ${text}`);
  const translated = { text: out, names: names.length > 0 ? names : null };
  translations.set(text, translated);
  return translated;
}

/** Where the literal opened at `start` ends (a doubled quote is an escaped one). */
function closingQuote(text: string, start: number, quote: string): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] !== quote) continue;
    if (text[i + 1] === quote) {
      i += 1;
      continue;
    }
    return i + 1;
  }
  return text.length;
}

type PgParam = string | number | Buffer | null;
const pgParam = (v: SqlParam | undefined): PgParam =>
  v === undefined || v === null
    ? null
    : typeof v === 'boolean'
      ? v
        ? 1
        : 0
      : typeof v === 'bigint'
        ? v.toString()
        : v;

function values(translated: Translated, params: Bind): PgParam[] {
  const named =
    params.length === 1 &&
    params[0] !== null &&
    typeof params[0] === 'object' &&
    !Buffer.isBuffer(params[0]);
  if (translated.names === null) {
    if (named)
      throw new Error(
        `named parameters given to a statement with ? placeholders: ${translated.text}`,
      );
    return (params as SqlParam[]).map(pgParam);
  }
  if (!named)
    throw new Error(
      `positional parameters given to a statement with @name placeholders: ${translated.text}`,
    );
  const given = params[0] as Readonly<Record<string, SqlParam | undefined>>;
  return translated.names.map((name) => {
    if (!(name in given)) throw new Error(`no value for @${name}`);
    return pgParam(given[name]);
  });
}

const INT8 = 20;
const NUMERIC = 1700;
const BOOL = 16;
const JSON_OID = 114;
const JSONB = 3802;

/**
 * Rows in SQLite's shapes, per query (pg's process-wide type parsers stay untouched; see
 * bigintNumber.ts): BIGINT and NUMERIC (what SUM of a BIGINT gives) as exact JavaScript
 * integers or numbers, booleans (a comparison's result) as 1/0, JSON as its text.
 */
const sqliteShapes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) => {
    switch (oid) {
      case INT8:
        return (value: string) => bigintNumber(value, 'a BIGINT value');
      case NUMERIC:
        return (value: string) => numericNumber(value);
      case BOOL:
        return (value: string) => (value === 't' ? 1 : 0);
      case JSON_OID:
      case JSONB:
        return (value: string) => value;
      default:
        return pgDriver().types.getTypeParser(oid, (format ?? 'text') as 'text');
    }
  }) as pg.CustomTypesConfig['getTypeParser'],
};

function numericNumber(value: string): number {
  const n = Number(value);
  if (Number.isInteger(n) && !Number.isSafeInteger(n))
    throw new RangeError(`${value} is not a number JavaScript can hold exactly`);
  return n;
}

/** Rows fetched per round trip when iterating. */
const ITERATE_BATCH = 500;

let cursorSerial = 0;

class PostgresQueries implements Queries {
  readonly dialect = 'postgres' as const;
  private savepoints = 0;

  /** `client`: inside a transaction on that connection; null: each statement from the pool. */
  constructor(
    private readonly pool: pg.Pool,
    private readonly client: pg.PoolClient | null,
  ) {}

  private async query<Row extends pg.QueryResultRow>(
    text: string,
    params: Bind,
  ): Promise<pg.QueryResult<Row>> {
    const translated = translatePlaceholders(text);
    const config: pg.QueryConfig = {
      text: translated.text,
      values: values(translated, params),
      types: sqliteShapes,
    };
    return this.client ? this.client.query<Row>(config) : this.pool.query<Row>(config);
  }

  async get<Row>(text: string, ...params: Bind): Promise<Row | undefined> {
    return (await this.query<Row & pg.QueryResultRow>(text, params)).rows[0];
  }

  async all<Row>(text: string, ...params: Bind): Promise<Row[]> {
    return (await this.query<Row & pg.QueryResultRow>(text, params)).rows;
  }

  async run(text: string, ...params: Bind): Promise<number> {
    return (await this.query(text, params)).rowCount ?? 0;
  }

  async *iterate<Row>(text: string, ...params: Bind): AsyncIterable<Row> {
    if (this.client) {
      yield* this.fetchInPieces<Row>(this.client, text, params);
      return;
    }
    // A cursor lives in a transaction: one of its own, on a connection held until the rows end.
    const client = await this.pool.connect();
    let ended = false;
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      yield* this.fetchInPieces<Row>(client, text, params);
      await client.query('COMMIT');
      ended = true;
    } finally {
      // An error, or a caller that stopped early (break), lands here with the transaction open.
      if (!ended) await client.query('ROLLBACK').catch((e: Error) => (broken = e));
      client.release(broken);
    }
  }

  private async *fetchInPieces<Row>(
    client: pg.PoolClient,
    text: string,
    params: Bind,
  ): AsyncIterable<Row> {
    const translated = translatePlaceholders(text);
    const cursor = `postern_cursor_${++cursorSerial}`;
    await client.query({
      text: `DECLARE ${cursor} NO SCROLL CURSOR FOR ${translated.text}`,
      values: values(translated, params),
    });
    try {
      for (;;) {
        const piece = await client.query<Row & pg.QueryResultRow>({
          text: `FETCH ${ITERATE_BATCH} FROM ${cursor}`,
          types: sqliteShapes,
        });
        for (const row of piece.rows) yield row as Awaited<Row>;
        if (piece.rows.length < ITERATE_BATCH) break;
      }
    } finally {
      await client.query(`CLOSE ${cursor}`).catch(() => undefined);
    }
  }

  async transaction<T>(work: (tx: Queries) => Promise<T>): Promise<T> {
    if (this.client) return this.savepoint(work);
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        const result = await work(new PostgresQueries(this.pool, client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        // A connection that cannot even roll back is not given back to the pool.
        await client.query('ROLLBACK').catch((e: Error) => (broken = e));
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }

  private async savepoint<T>(work: (tx: Queries) => Promise<T>): Promise<T> {
    const name = `sp${++this.savepoints}`;
    await this.client!.query(`SAVEPOINT ${name}`);
    try {
      const result = await work(this);
      await this.client!.query(`RELEASE SAVEPOINT ${name}`);
      return result;
    } catch (err) {
      await this.client!.query(`ROLLBACK TO SAVEPOINT ${name}`);
      await this.client!.query(`RELEASE SAVEPOINT ${name}`);
      throw err;
    } finally {
      this.savepoints -= 1;
    }
  }
}
