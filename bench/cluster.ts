/**
 * `BENCH_ONLY=cluster` (also in the full run): the same work on three set-ups, back to back on one
 * machine (issue 23): a SQLite node; a node on PostgreSQL; three nodes on one PostgreSQL database,
 * the load spread evenly over their listeners. For each:
 *
 * - accept: durable accepts/s of POST /v1/send (1 KB), the send phase's generator and clients
 *   (bench/httpLoad.ts), with delivery off;
 * - relay: bench/relay.ts's load (2 KB over HTTP and SMTP) with delivery on to a local sink, then
 *   the backlog drained;
 * - and per message, over each of those: the CPU of every Postern process and of every process of
 *   the PostgreSQL instance; for PostgreSQL, database commits, WAL flushes and WAL bytes.
 *
 * How the costs are read:
 * - CPU: utime + stime from /proc/<pid>/stat of each Postern process (its threads included) and of
 *   the postmaster and each process it forked (backends, WAL writer, checkpointer, autovacuum),
 *   each with the CPU of the children it has reaped, so a backend that exits meanwhile still
 *   counts (cpuWithChildren). Over the measured window, after the warm-up (a node's first seconds
 *   compile its code: on a slow phase that would dominate), divided by the messages of that
 *   window: acknowledged (accept), or sent from the window's start until the backlog drained
 *   (relay).
 * - Statements (issue 35): with pg_stat_statements loaded in the bench's instance (unless
 *   BENCH_PG_STATEMENTS=0), every top-level statement the nodes sent to the phase's database
 *   (BEGIN and COMMIT included: track_utility), over the same span as the commits below and per
 *   the same messages; node-postgres sends each query as one exchange and waits for its answer
 *   (Postern pipelines nothing), so each statement is one round trip. Explicit transactions are
 *   the BEGINs among them; the rest of xact_commit are single statements in autocommit.
 * - Database: xact_commit of the phase's database (pg_stat_database: every transaction, reads
 *   included), wal_sync (pg_stat_wal, PostgreSQL 14+) and the WAL insert position, read before the
 *   nodes start (after a CHECKPOINT, so every phase starts alike) and after they have stopped and
 *   their backends have exited: a backend reports its counts at most once a second while busy,
 *   and at its exit, so only then are they whole. Divided by every message of the phase (stored;
 *   sent). So these include the nodes' start and stop (a few dozen transactions) and their
 *   background work (about 20 transactions a second per node); the bench's own reads of the
 *   phase's database during the relay phase are taken off.
 *
 * The private PostgreSQL is durable as in production (fsync, synchronous_commit and
 * full_page_writes on; test/support/privatePostgres.ts), otherwise on PostgreSQL's defaults.
 */
import { spawnSync } from 'node:child_process';
import Database from 'better-sqlite3';
import pg from 'pg';
import { type SpawnedPostern, tempStateDir } from '../test/support/postern.js';
import {
  type PostgresInstance,
  privatePostgresUnavailable,
  startPostgresInstance,
} from '../test/support/privatePostgres.js';
import {
  cpuSeconds,
  cpuWithChildren,
  machine,
  removeAfterBench,
  sleep,
  startBenchPostern,
} from './benchServer.js';
import { clientsFor, DURATION_MS, load, SEND_BODY, summary, WARMUP_MS } from './httpLoad.js';
import {
  type BenchStore,
  driveRelay,
  RELAY_HTTP_CLIENTS,
  RELAY_SECONDS,
  RELAY_SMTP_SESSIONS,
  RELAY_WARMUP_MS,
  type RelaySetup,
  type Sink,
  setUp,
  startSink,
  storeEnv,
} from './relay.js';
import { wrkAvailable } from './wrk.js';

/** The three set-ups, in the order they run. */
const SETUPS: { backend: 'sqlite' | 'postgres'; nodes: number }[] = [
  { backend: 'sqlite', nodes: 1 },
  { backend: 'postgres', nodes: 1 },
  { backend: 'postgres', nodes: 3 },
];

/** What one phase cost, per message. */
export interface PhaseCost {
  /**
   * CPU over the measured window (after the warm-up: a node's first seconds compile its code), per
   * message of that window: acknowledged (accept), or sent until the backlog drained (relay).
   */
  cpu: {
    messages: number;
    seconds: number;
    postern_ms_per_message: number;
    /** null on SQLite. */
    postgres_ms_per_message: number | null;
    total_ms_per_message: number;
    /** Cores busy on average: Postern's processes, PostgreSQL's, and the load generator (this process and wrk). */
    busy_cores: { postern: number; postgres: number | null; generator: number };
  };
  /**
   * PostgreSQL's counters from before the nodes started until they had stopped, per message
   * stored (accept) or sent (relay); null on SQLite.
   */
  database: {
    messages: number;
    /** Transactions committed (xact_commit: reads included), per message: the issue-35 count. */
    commits_per_message: number;
    /** Transactions rolled back (xact_rollback), per message. */
    rollbacks_per_message: number;
    wal_flushes_per_message: number;
    wal_bytes_per_message: number;
    /** Connections the nodes opened (pg_stat_database.sessions), in all: a pool opens its connections once, then reuses them. */
    connections: number;
    /** From pg_stat_statements; null when it is not loaded (`statements_unavailable` says why). */
    statements: StatementCost | null;
    statements_unavailable: string | null;
  } | null;
}

/** What the nodes sent to the phase's database, per message (pg_stat_statements, top-level statements). */
export interface StatementCost {
  /** Every statement, BEGIN and COMMIT included. */
  statements_per_message: number;
  /** One per statement: node-postgres sends a query and waits for its answer before the next on that connection. */
  round_trips_per_message: number;
  /** BEGINs: transactions of more than one statement. */
  explicit_transactions_per_message: number;
  /** Rows returned or changed by the statements, per message. */
  rows_per_message: number;
  /** Server time executing the statements (total_exec_time), ms per message. */
  exec_ms_per_message: number;
  /** The statements sent most often: normalized text (first 160 characters), calls and rows per message, execution ms per message. */
  top: {
    query: string;
    calls_per_message: number;
    rows_per_message: number;
    exec_ms_per_message: number;
  }[];
}

export interface ClusterRow {
  store: 'sqlite' | 'postgres';
  nodes: number;
  accept: ReturnType<typeof summary> & { clients: number; seconds: number; cost: PhaseCost };
  relay: {
    seconds: number;
    delivered_per_s: number;
    accepted_per_s: number;
    errors: number;
    error_samples: string[];
    /** Seconds after the load until every acknowledged message was sent; null when not within 30 s. */
    drained_after_s: number | null;
    cost: PhaseCost;
  };
}

export interface ClusterReport {
  machine: string;
  generator: 'wrk' | 'node';
  /** `uptime` before and after the section: a high load average means other work shared the machine. */
  uptime: { before: string; after: string };
  /** The instance the PostgreSQL rows ran on, or why there are none. */
  postgres: { version: string; settings: string[] } | { unavailable: string };
  rows: ClusterRow[];
}

function uptime(): string {
  return spawnSync('uptime', { encoding: 'utf8' }).stdout.trim().replace(/\s+/g, ' ');
}

/** The database counters a phase's costs are read from. */
interface DbCounters {
  commits: number;
  rollbacks: number;
  sessions: number;
  walSyncs: number;
  walLsn: string;
  /** pg_stat_statements' top-level rows for the database, by queryid; null without it. */
  statements: Map<string, StatementRow> | null;
}

interface StatementRow {
  query: string;
  calls: number;
  rows: number;
  execMs: number;
}

/** Marks the bench's own statements on a phase's database, so they are left out of the nodes' (pg_stat_statements keeps a query's first text, comments included). */
export const BENCH_STATEMENT_MARK = '/* postern-bench */';

/** The settings that load pg_stat_statements, unless BENCH_PG_STATEMENTS=0; it costs the instance a little CPU per statement. */
const STATEMENT_SETTINGS =
  process.env.BENCH_PG_STATEMENTS === '0'
    ? []
    : [
        "shared_preload_libraries = 'pg_stat_statements'",
        'pg_stat_statements.track = top',
        'pg_stat_statements.max = 10000',
      ];

/** The bench's private PostgreSQL: a fresh database per phase, and its counters. */
class BenchPostgres {
  private next = 0;

  private constructor(
    readonly instance: PostgresInstance,
    /** On the `postgres` database: the bench's own statements count there, not in a phase's database. */
    private readonly admin: pg.Pool,
    /** Why statements are not counted, or null when pg_stat_statements is loaded. */
    readonly statementsUnavailable: string | null,
  ) {}

  static async start(): Promise<BenchPostgres> {
    const instance = await startPostgresInstance(STATEMENT_SETTINGS);
    const admin = new pg.Pool({ connectionString: instance.url, max: 1 });
    let unavailable: string | null =
      STATEMENT_SETTINGS.length === 0 ? 'BENCH_PG_STATEMENTS=0' : null;
    if (!unavailable) {
      try {
        // The view lives in the database it is created in and shows every database's statements.
        await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      } catch (err) {
        unavailable = `pg_stat_statements: ${(err as Error).message}`;
      }
    }
    return new BenchPostgres(instance, admin, unavailable);
  }

  async freshDatabase(): Promise<{ name: string; url: string }> {
    const name = `bench_${++this.next}`;
    await this.admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(this.instance.url);
    url.pathname = `/${name}`;
    return { name, url: url.toString() };
  }

  async checkpoint(): Promise<void> {
    await this.admin.query('CHECKPOINT');
  }

  /** Once no backend is connected to `database`, and a moment more: a backend reports its counts as it exits, after it has left pg_stat_activity. */
  async settled(database: string): Promise<void> {
    for (let waited = 0; waited < 30_000; waited += 100) {
      const { rows } = await this.admin.query<{ n: string }>(
        'SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1',
        [database],
      );
      if (Number(rows[0].n) === 0) break;
      await sleep(100);
    }
    await sleep(300);
  }

  async counters(database: string): Promise<DbCounters> {
    const { rows } = await this.admin.query<{
      commits: string;
      rollbacks: string;
      sessions: string;
      wal_sync: string;
      lsn: string;
    }>(
      `SELECT d.xact_commit AS commits, d.xact_rollback AS rollbacks, d.sessions AS sessions,
              (SELECT wal_sync FROM pg_stat_wal) AS wal_sync,
              pg_current_wal_insert_lsn()::text AS lsn
         FROM pg_stat_database d WHERE d.datname = $1`,
      [database],
    );
    let statements: Map<string, StatementRow> | null = null;
    if (!this.statementsUnavailable) {
      const found = await this.admin.query<{
        queryid: string;
        query: string;
        calls: string;
        rows: string;
        ms: number;
      }>(
        `SELECT queryid::text AS queryid, query, calls, rows, total_exec_time AS ms
           FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
          WHERE d.datname = $1 AND s.toplevel AND position($2 in s.query) = 0`,
        [database, BENCH_STATEMENT_MARK],
      );
      statements = new Map(
        found.rows.map((r) => [
          r.queryid,
          { query: r.query, calls: Number(r.calls), rows: Number(r.rows), execMs: r.ms },
        ]),
      );
    }
    return {
      commits: Number(rows[0].commits),
      rollbacks: Number(rows[0].rollbacks),
      sessions: Number(rows[0].sessions),
      walSyncs: Number(rows[0].wal_sync),
      walLsn: rows[0].lsn,
      statements,
    };
  }

  async walBytesBetween(from: string, to: string): Promise<number> {
    const { rows } = await this.admin.query<{ d: string }>(
      'SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn) AS d',
      [from, to],
    );
    return Number(rows[0].d);
  }

  cpuSeconds(): number {
    return cpuWithChildren(this.instance.pid);
  }

  async stop(): Promise<void> {
    await this.admin.end();
    await this.instance.stop();
  }
}

/** A phase's store: a fresh SQLite state directory or a fresh database on the instance. */
interface PhaseStore {
  store: BenchStore;
  /** The phase's database on the instance; null on SQLite. */
  database: string | null;
}

async function phaseStore(
  backend: 'sqlite' | 'postgres',
  pgServer: BenchPostgres | null,
): Promise<PhaseStore> {
  if (backend === 'sqlite') return { store: { backend: 'sqlite' }, database: null };
  const db = await pgServer!.freshDatabase();
  return { store: { backend: 'postgres', url: db.url }, database: db.name };
}

/** `count` servers with `config` on the phase's store: the set-up's state directory for one SQLite server, a state directory each for PostgreSQL nodes. */
async function startNodes(
  setup: RelaySetup,
  config: string,
  store: BenchStore,
  count: number,
): Promise<SpawnedPostern[]> {
  if (store.backend === 'sqlite') return [await startBenchPostern(setup.stateDir, config)];
  return Promise.all(
    Array.from({ length: count }, (_, i) => {
      const dir = tempStateDir(`postern-bench-node-${i + 1}-`);
      removeAfterBench(dir);
      return startBenchPostern(dir, config, {
        ...storeEnv(store),
        POSTERN_NODE_ID: `node-${i + 1}`,
      });
    }),
  );
}

async function stopNodes(nodes: SpawnedPostern[]): Promise<void> {
  await Promise.all(
    nodes.map((n) => (n.child.exitCode === null && n.child.signalCode === null ? n.stop() : null)),
  );
}

/** Rows of the phase's `messages` table (with `status`, only those), read after its servers stopped or while they run. */
async function countMessages(
  phase: PhaseStore,
  setup: RelaySetup,
  status?: string,
): Promise<number> {
  const where = status ? ` WHERE status = '${status}'` : '';
  if (phase.store.backend === 'sqlite') {
    const db = new Database(`${setup.stateDir}/postern.db`, {
      readonly: true,
      fileMustExist: true,
    });
    try {
      db.pragma('busy_timeout = 5000');
      return db.prepare(`SELECT COUNT(*) FROM messages${where}`).pluck().get() as number;
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: phase.store.url });
  await client.connect();
  try {
    return Number(
      (await client.query<{ n: string }>(`SELECT count(*) AS n FROM messages${where}`)).rows[0].n,
    );
  } finally {
    await client.end();
  }
}

/** CPU seconds so far: the servers', the instance's, and the generator's (this process and the children it has reaped, wrk). */
function cpuNow(nodes: SpawnedPostern[], pgServer: BenchPostgres | null) {
  return {
    at: performance.now(),
    postern: nodes.reduce((sum, n) => sum + cpuSeconds(n.child.pid!, true), 0),
    postgres: pgServer ? pgServer.cpuSeconds() : 0,
    generator: cpuSeconds(process.pid, true),
  };
}

const per = (value: number, messages: number, digits: number) =>
  +(value / Math.max(1, messages)).toFixed(digits);

type CpuSample = ReturnType<typeof cpuNow>;

function cpuCost(
  messages: number,
  cpu0: CpuSample,
  cpu1: CpuSample,
  onPostgres: boolean,
): PhaseCost['cpu'] {
  const seconds = (cpu1.at - cpu0.at) / 1000;
  const postern = cpu1.postern - cpu0.postern;
  const postgres = onPostgres ? cpu1.postgres - cpu0.postgres : null;
  return {
    messages,
    seconds: +seconds.toFixed(2),
    postern_ms_per_message: per(postern * 1000, messages, 3),
    postgres_ms_per_message: postgres === null ? null : per(postgres * 1000, messages, 3),
    total_ms_per_message: per((postern + (postgres ?? 0)) * 1000, messages, 3),
    busy_cores: {
      postern: +(postern / seconds).toFixed(2),
      postgres: postgres === null ? null : +(postgres / seconds).toFixed(2),
      generator: +((cpu1.generator - cpu0.generator) / seconds).toFixed(2),
    },
  };
}

/** What the database counted between two reads of its counters (the bench's own commits taken off). */
interface DbDelta {
  commits: number;
  rollbacks: number;
  sessions: number;
  walSyncs: number;
  walBytes: number;
  statements: StatementRow[] | null;
  statementsUnavailable: string | null;
}

function statementsBetween(
  before: Map<string, StatementRow> | null,
  after: Map<string, StatementRow> | null,
): StatementRow[] | null {
  if (!before || !after) return null;
  const rows: StatementRow[] = [];
  for (const [id, a] of after) {
    const b = before.get(id);
    const row = {
      query: a.query,
      calls: a.calls - (b?.calls ?? 0),
      rows: a.rows - (b?.rows ?? 0),
      execMs: a.execMs - (b?.execMs ?? 0),
    };
    if (row.calls > 0) rows.push(row);
  }
  return rows.sort((x, y) => y.calls - x.calls);
}

const TOP_STATEMENTS = 12;

function statementCost(rows: StatementRow[], messages: number): StatementCost {
  const calls = rows.reduce((a, r) => a + r.calls, 0);
  const begins = rows
    .filter((r) => /^\s*(BEGIN|START\s+TRANSACTION)\b/i.test(r.query))
    .reduce((a, r) => a + r.calls, 0);
  return {
    statements_per_message: per(calls, messages, 3),
    round_trips_per_message: per(calls, messages, 3),
    explicit_transactions_per_message: per(begins, messages, 3),
    rows_per_message: per(
      rows.reduce((a, r) => a + r.rows, 0),
      messages,
      3,
    ),
    exec_ms_per_message: per(
      rows.reduce((a, r) => a + r.execMs, 0),
      messages,
      4,
    ),
    top: rows.slice(0, TOP_STATEMENTS).map((r) => ({
      query: r.query.replace(/\s+/g, ' ').trim().slice(0, 160),
      calls_per_message: per(r.calls, messages, 3),
      rows_per_message: per(r.rows, messages, 3),
      exec_ms_per_message: per(r.execMs, messages, 4),
    })),
  };
}

function databaseCost(messages: number, db: DbDelta | null): PhaseCost['database'] {
  if (!db) return null;
  return {
    messages,
    commits_per_message: per(db.commits, messages, 3),
    rollbacks_per_message: per(db.rollbacks, messages, 3),
    wal_flushes_per_message: per(db.walSyncs, messages, 3),
    wal_bytes_per_message: per(db.walBytes, messages, 0),
    connections: db.sessions,
    statements: db.statements ? statementCost(db.statements, messages) : null,
    statements_unavailable: db.statements ? null : db.statementsUnavailable,
  };
}

/**
 * Around a phase on PostgreSQL: a checkpoint and the counters before `run` starts the nodes, the
 * counters again once `run` has stopped them and their backends are gone; `ownCommits()` is the
 * bench's own transactions on the phase's database meanwhile, taken off.
 */
async function withDatabaseCounters<T>(
  pgServer: BenchPostgres | null,
  phase: PhaseStore,
  run: () => Promise<T>,
  ownCommits: () => number,
): Promise<{ result: T; db: DbDelta | null }> {
  if (!pgServer || !phase.database) return { result: await run(), db: null };
  await pgServer.checkpoint();
  const before = await pgServer.counters(phase.database);
  const result = await run();
  await pgServer.settled(phase.database);
  const after = await pgServer.counters(phase.database);
  return {
    result,
    db: {
      commits: after.commits - before.commits - ownCommits(),
      rollbacks: after.rollbacks - before.rollbacks,
      // The bench's own connection for its reads (relay) is one of them.
      sessions: after.sessions - before.sessions,
      walSyncs: after.walSyncs - before.walSyncs,
      walBytes: await pgServer.walBytesBetween(before.walLsn, after.walLsn),
      statements: statementsBetween(before.statements, after.statements),
      statementsUnavailable: pgServer.statementsUnavailable,
    },
  };
}

/**
 * Runs `drive` on started nodes (it calls `windowOpens` when its measured window opens, after
 * the warm-up), then stops them: what it measured, and the CPU of the window per message it counts.
 */
async function measureWindow<T>(
  nodes: SpawnedPostern[],
  pgServer: BenchPostgres | null,
  backend: 'sqlite' | 'postgres',
  drive: (windowOpens: () => void) => Promise<{ value: T; messages: number }>,
): Promise<{ value: T; cpu: PhaseCost['cpu'] }> {
  let start: CpuSample | undefined;
  const { value, messages } = await drive(() => (start = cpuNow(nodes, pgServer)));
  const end = cpuNow(nodes, pgServer);
  await stopNodes(nodes);
  return { value, cpu: cpuCost(messages, start ?? end, end, backend === 'postgres') };
}

async function acceptPhase(
  backend: 'sqlite' | 'postgres',
  count: number,
  pgServer: BenchPostgres | null,
): Promise<ClusterRow['accept']> {
  const phase = await phaseStore(backend, pgServer);
  // Delivery off; the provider points at a port nobody listens on.
  const setup = await setUp(9, 'postern-bench-cluster-', phase.store);
  let nodes: SpawnedPostern[] = [];
  try {
    const { result, db } = await withDatabaseCounters(
      pgServer,
      phase,
      async () => {
        nodes = await startNodes(setup, setup.configOff, phase.store, count);
        const headers = {
          authorization: `Bearer ${setup.key}`,
          'content-type': 'application/json',
        };
        const urls = nodes.map((n) => new URL('/v1/send', n.production));
        const { value: loaded, cpu } = await measureWindow(
          nodes,
          pgServer,
          backend,
          async (windowOpens) => {
            const loaded = await load(
              urls,
              'POST',
              headers,
              SEND_BODY,
              202,
              DURATION_MS,
              windowOpens,
            );
            return { value: loaded, messages: loaded.ok };
          },
        );
        return { loaded, cpu };
      },
      () => 0,
    );
    const stored = await countMessages(phase, setup);
    if (stored < result.loaded.ok)
      throw new Error(`only ${stored} rows for ${result.loaded.ok} acknowledged sends`);
    return {
      ...summary(result.loaded),
      clients: clientsFor(count),
      seconds: DURATION_MS / 1000,
      cost: { cpu: result.cpu, database: databaseCost(stored, db) },
    };
  } finally {
    await Promise.all(
      nodes.map((n) =>
        n.child.exitCode === null && n.child.signalCode === null ? n.kill() : null,
      ),
    );
  }
}

async function relayPhase(
  backend: 'sqlite' | 'postgres',
  count: number,
  pgServer: BenchPostgres | null,
  sink: Sink,
): Promise<ClusterRow['relay']> {
  const phase = await phaseStore(backend, pgServer);
  const setup = await setUp(sink.port, 'postern-bench-cluster-', phase.store);
  let nodes: SpawnedPostern[] = [];
  // The bench's reads of the sent count while the nodes run (one transaction each), on a connection closed before the counters are read again.
  let reads = 0;
  const pool =
    phase.store.backend === 'postgres'
      ? new pg.Pool({ connectionString: phase.store.url, max: 1 })
      : null;
  const countSent = async () => {
    if (!pool) return countMessages(phase, setup, 'sent');
    reads++;
    return Number(
      (
        await pool.query<{ n: string }>(
          `SELECT count(*) AS n FROM messages WHERE status = 'sent' ${BENCH_STATEMENT_MARK}`,
        )
      ).rows[0].n,
    );
  };
  try {
    const { result, db } = await withDatabaseCounters(
      pgServer,
      phase,
      async () => {
        nodes = await startNodes(setup, setup.configOn, phase.store, count);
        const { value: drive, cpu } = await measureWindow(
          nodes,
          pgServer,
          backend,
          async (windowOpens) => {
            const window = {
              arm: async () => {},
              open: async () => windowOpens(),
              close: async () => {},
            };
            const drive = await driveRelay(
              { nodes, key: setup.key, countSent },
              sink,
              RELAY_SECONDS,
              window,
            );
            return { value: drive, messages: drive.sent_total - drive.sent_at_start };
          },
        );
        await pool?.end();
        return { drive, cpu };
      },
      () => reads,
    );
    const { drive } = result;
    return {
      seconds: drive.seconds,
      delivered_per_s: drive.delivered_per_s,
      accepted_per_s: drive.accepted_per_s,
      errors: drive.errors,
      error_samples: drive.error_samples,
      drained_after_s: Number.isNaN(drive.drain_after_load_s) ? null : drive.drain_after_load_s,
      cost: { cpu: result.cpu, database: databaseCost(drive.sent_total, db) },
    };
  } finally {
    await Promise.all(
      nodes.map((n) =>
        n.child.exitCode === null && n.child.signalCode === null ? n.kill() : null,
      ),
    );
    if (pool && !pool.ending) await pool.end();
  }
}

export async function clusterBench(): Promise<ClusterReport> {
  const before = uptime();
  const unavailable = privatePostgresUnavailable();
  const pgServer = unavailable ? null : await BenchPostgres.start();
  const sink = await startSink();
  const rows: ClusterRow[] = [];
  try {
    for (const { backend, nodes } of SETUPS) {
      if (backend === 'postgres' && !pgServer) continue;
      const accept = await acceptPhase(backend, nodes, pgServer);
      const relay = await relayPhase(backend, nodes, pgServer, sink);
      rows.push({ store: backend, nodes, accept, relay });
    }
  } finally {
    await sink.stop();
    await pgServer?.stop();
  }
  return {
    machine: machine(),
    generator: wrkAvailable() ? 'wrk' : 'node',
    uptime: { before, after: uptime() },
    postgres: pgServer
      ? { version: pgServer.instance.version, settings: pgServer.instance.settings }
      : { unavailable: String(unavailable) },
    rows,
  };
}

/** Columns padded to their widest cell, numbers to the right. */
function table(header: string[], body: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), ...body.map(line)].map((l) => `  ${l.trimEnd()}`);
}

const n = (v: number | null, digits = 0) =>
  v === null
    ? '—'
    : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const storeName = (r: ClusterRow) => (r.store === 'sqlite' ? 'SQLite' : 'PostgreSQL');

function costCells({ cpu, database }: PhaseCost): string[] {
  return [
    n(cpu.postern_ms_per_message, 2),
    n(cpu.postgres_ms_per_message, 2),
    n(cpu.total_ms_per_message, 2),
    `${n(cpu.busy_cores.postern, 2)} + ${n(cpu.busy_cores.postgres, 2)} (${n(cpu.busy_cores.generator, 2)})`,
    n(database?.commits_per_message ?? null, 2),
    n(database?.statements?.statements_per_message ?? null, 2),
    n(database?.statements?.explicit_transactions_per_message ?? null, 2),
    n(database?.wal_flushes_per_message ?? null, 3),
    n(database?.wal_bytes_per_message ?? null),
  ];
}

const COST_HEADER = [
  'CPU ms/msg Postern',
  'PostgreSQL',
  'total',
  'cores Postern + PG (generator)',
  'commits/msg',
  'statements = round trips/msg',
  'BEGINs/msg',
  'WAL flushes/msg',
  'WAL B/msg',
];

/** For each PostgreSQL row and phase, the statements sent most often, per message. */
function statementLines(r: ClusterReport): string[] {
  const lines: string[] = [];
  for (const row of r.rows) {
    for (const [phase, db] of [
      ['accept', row.accept.cost.database],
      ['relay', row.relay.cost.database],
    ] as const) {
      if (!db) continue;
      if (!db.statements) {
        lines.push(
          `  ${storeName(row)} × ${row.nodes} ${phase}: statements not counted (${db.statements_unavailable})`,
        );
        continue;
      }
      const s = db.statements;
      lines.push(
        `  ${storeName(row)} × ${row.nodes} ${phase}: ${n(s.statements_per_message, 2)} statements (round trips) per message, ${n(s.explicit_transactions_per_message, 2)} BEGIN, ` +
          `${n(db.commits_per_message, 2)} commits, ${n(db.rollbacks_per_message, 3)} rollbacks, ${n(s.rows_per_message, 1)} rows, ${n(s.exec_ms_per_message, 3)} ms executing; ${db.connections} connections opened; most sent:`,
      );
      for (const t of s.top) lines.push(`    ${n(t.calls_per_message, 3).padStart(6)}  ${t.query}`);
    }
  }
  return lines;
}

/** Human-readable lines in the style of bench/run.ts: the machine, the instance, two tables. */
export function clusterLines(r: ClusterReport): string[] {
  const pgLine =
    'unavailable' in r.postgres
      ? `PostgreSQL rows: none (${r.postgres.unavailable})`
      : `PostgreSQL ${r.postgres.version}, a private instance on this machine, durable as in production (${r.postgres.settings.join(', ')}), otherwise PostgreSQL's defaults; Postern's store.postgres.pool_size default (20)`;
  const drained = (row: ClusterRow) =>
    row.relay.drained_after_s === null ? 'not in 30 s' : `${row.relay.drained_after_s} s`;
  const errors = r.rows
    .flatMap((row) => row.relay.error_samples.map((e) => `${storeName(row)} × ${row.nodes}: ${e}`))
    .slice(0, 5);
  return [
    `cluster: machine: ${r.machine}; HTTP load generator: ${r.generator}`,
    `uptime before: ${r.uptime.before}`,
    pgLine,
    `POST /v1/send (1 KB text, ${clientsFor(1)} clients; on three nodes ${clientsFor(3)}, a third on each; ${WARMUP_MS / 1000}s warm-up + ${DURATION_MS / 1000}s; delivery off). CPU per message acknowledged in the window; database counters per row stored, from the nodes' start to their stop:`,
    ...table(
      ['store', 'nodes', 'accepts/s', 'p50 ms', 'p99 ms', 'errors', ...COST_HEADER],
      r.rows.map((row) => [
        storeName(row),
        String(row.nodes),
        n(row.accept.per_s),
        n(row.accept.p50_ms, 1),
        n(row.accept.p99_ms, 1),
        n(row.accept.errors),
        ...costCells(row.accept.cost),
      ]),
    ),
    `relay end to end (2 KB, ${RELAY_HTTP_CLIENTS} HTTP clients + ${RELAY_SMTP_SESSIONS} SMTP sessions spread over the nodes, delivery to a local sink, ${RELAY_WARMUP_MS / 1000}s warm-up + ${RELAY_SECONDS}s). CPU per message sent from the window's start until the backlog drained; database counters per message sent, from the nodes' start to their stop:`,
    ...table(
      ['store', 'nodes', 'delivered/s', 'accepting/s', 'errors', 'drained', ...COST_HEADER],
      r.rows.map((row) => [
        storeName(row),
        String(row.nodes),
        n(row.relay.delivered_per_s),
        n(row.relay.accepted_per_s),
        n(row.relay.errors),
        drained(row),
        ...costCells(row.relay.cost),
      ]),
    ),
    ...(errors.length > 0 ? [`relay errors (first ${errors.length}): ${errors.join(' | ')}`] : []),
    "What the nodes sent to PostgreSQL (pg_stat_statements, top-level statements, from the nodes' start to their stop, per row stored (accept) or message sent (relay); each statement one round trip):",
    ...statementLines(r),
    `uptime after: ${r.uptime.after}`,
  ];
}
