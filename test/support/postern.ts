import { type ChildProcess, spawn } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { type Clock, systemClock } from '../../src/clock.js';
import { buildConfig, listenerEnvName, type PosternConfig } from '../../src/config/load.js';
import { type Logger, silentLogger } from '../../src/log.js';
import { type BoundListener, type RunningPostern, startPostern } from '../../src/main.js';
import type { OperatorContext } from '../../src/operator/context.js';
import { createKey } from '../../src/operator/keys.js';
import { createProject, type ProjectView } from '../../src/operator/projects.js';
import { attachProvider } from '../../src/operator/providers.js';
import { type Db, openDatabase } from '../../src/store/db.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { sqliteQueries } from '../../src/store/queries.js';
import { repoRoot } from './paths.js';
import {
  databaseFor,
  dropDatabaseFor,
  freshDatabase,
  sharedPostgres,
  testPool,
  testStore,
} from './postgres.js';
import { HANG_GUARD_MS } from './waiting.js';

export { repoRoot };
export const cliPath = path.join(repoRoot, 'bin', 'postern.js');

export function tempStateDir(prefix = 'postern-test-'): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

export interface TestPostern {
  running: RunningPostern;
  config: PosternConfig;
  /** Base URL of the production and sandbox HTTP listeners. */
  production: string;
  sandbox: string;
  /** SMTP ports on 127.0.0.1 (0 unless started with `smtp: true`). */
  smtp: Record<'production' | 'sandbox', { starttls: number; implicit: number }>;
  /** Base URL of the console listener (`''` unless started with `console`). */
  console: string;
  stateDir: string;
  /** The suites' own connection (as the CLI's): `ctx.store` runs the store's statements on it; raw SQL checks read it directly. */
  db: Db;
  ctx: OperatorContext;
  close(): Promise<void>;
}

/** A real Postern (real SQLite, real spool, real sockets on ephemeral ports) inside the test process. */
export async function startTestPostern(
  opts: {
    clock?: Clock;
    config?: Record<string, unknown>;
    stateDir?: string;
    smtp?: boolean;
    console?: boolean | { cert: string; key: string };
    logger?: Logger;
  } = {},
): Promise<TestPostern> {
  const stateDir = opts.stateDir ?? tempStateDir();
  const ownsDir = opts.stateDir === undefined;
  const smtpListeners = opts.smtp
    ? (['production', 'sandbox'] as const).flatMap((environment) =>
        (['starttls', 'implicit'] as const).map((tls) => ({
          name: `smtp-${environment}-${tls}`,
          protocol: 'smtp',
          environment,
          host: '127.0.0.1',
          port: 0,
          tls,
        })),
      )
    : [];
  // POSTERN_TEST_STORE=postgres: the same suites against a database of this state directory's own
  // (unless the test names a store itself: several nodes on one database).
  const database =
    testStore() === 'postgres' && !opts.config?.store ? await databaseFor(stateDir) : null;
  const config = buildConfig(
    {
      state_dir: stateDir,
      ...(database
        ? { store: { backend: 'postgres', postgres: { url: database.url, pool_size: 10 } } }
        : {}),
      listeners: [
        {
          name: 'http-production',
          protocol: 'http',
          environment: 'production',
          host: '127.0.0.1',
          port: 0,
        },
        {
          name: 'http-sandbox',
          protocol: 'http',
          environment: 'sandbox',
          host: '127.0.0.1',
          port: 0,
        },
        ...smtpListeners,
        ...(opts.console
          ? [
              {
                name: 'console',
                protocol: 'console',
                host: '127.0.0.1',
                port: 0,
                ...(typeof opts.console === 'object' ? opts.console : {}),
              },
            ]
          : []),
      ],
      // Generous request limits: suites about other rules must not trip them (the rate-limit
      // suite sets its own).
      rate_limits: {
        send_per_key: 100_000,
        batch_per_key: 100_000,
        unauthenticated_per_ip: 100_000,
      },
      // Accepted messages stay as accepted unless a suite turns delivery on (with its own sink).
      delivery: { enabled: false },
      ...opts.config,
    },
    {},
  );
  const clock = opts.clock ?? systemClock;
  const running = await startPostern(config, opts.logger ?? silentLogger(), clock);
  // The suites act as the CLI does: on a connection of their own (the server's only reads).
  const operatorPool =
    config.store.backend === 'postgres' ? testPool(config.store.postgres.url!, 4) : null;
  const operatorDb = operatorPool
    ? null
    : openDatabase(stateDir, silentLogger(), { migrate: false });
  const store = operatorPool ? postgresQueries(operatorPool) : sqliteQueries(operatorDb!);
  const url = (env: string) =>
    running.listeners.find((l) => l.environment === env && l.protocol === 'http')!.url;
  const smtpPort = (name: string) => running.listeners.find((l) => l.name === name)?.port ?? 0;
  return {
    running,
    config,
    production: url('production'),
    sandbox: url('sandbox'),
    smtp: {
      production: {
        starttls: smtpPort('smtp-production-starttls'),
        implicit: smtpPort('smtp-production-implicit'),
      },
      sandbox: {
        starttls: smtpPort('smtp-sandbox-starttls'),
        implicit: smtpPort('smtp-sandbox-implicit'),
      },
    },
    console: running.listeners.find((l) => l.protocol === 'console')?.url ?? '',
    stateDir,
    get db(): Db {
      if (!operatorDb)
        throw new Error(
          'this test reads the SQLite index directly: mark it sqliteOnly() (the suites run on PostgreSQL)',
        );
      return operatorDb;
    },
    ctx: { store, clock, config, spoolRoot: path.join(stateDir, 'spool') },
    async close() {
      await running.close();
      operatorDb?.close();
      await operatorPool?.end();
      if (ownsDir) {
        await dropDatabaseFor(stateDir);
        rmSync(stateDir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Test servers as the nodes of one cluster, whatever POSTERN_TEST_STORE says: one fresh database
 * on the private PostgreSQL (skip with postgresUnavailable()), nodes named node-1, node-2, …, each
 * with its own state directory; `close` stops them and drops the database.
 */
export async function startTestNodes(
  count: number,
  opts: Omit<NonNullable<Parameters<typeof startTestPostern>[0]>, 'stateDir'> = {},
): Promise<{ nodes: TestPostern[]; close(): Promise<void> }> {
  const database = await freshDatabase((await sharedPostgres()).url);
  const nodes: TestPostern[] = [];
  const close = async () => {
    for (const node of nodes) await node.close();
    await database.drop();
  };
  try {
    for (let i = 1; i <= count; i++) {
      const config = {
        ...opts.config,
        store: { backend: 'postgres', postgres: { url: database.url, pool_size: 10 } },
        node: { id: `node-${i}` },
      };
      nodes.push(await startTestPostern({ ...opts, config }));
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { nodes, close };
}

export interface ProjectWithKeys {
  project: ProjectView;
  liveKey: string;
  testKey: string;
}

/**
 * A project with a live and a test key. By default on the `pro` plan with an `smtp` provider
 * attached, so sends are not refused by plan or policy unless a test sets that up.
 */
export async function createProjectWithKeys(
  ctx: OperatorContext,
  name = 'test project',
  plan = 'pro',
  opts: { provider?: boolean } = {},
): Promise<ProjectWithKeys> {
  const project = await createProject(ctx, name, plan);
  // A loopback relay nobody listens on: nothing ever leaves this machine.
  if (opts.provider !== false)
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: '9',
      tls: 'none',
    });
  return {
    project,
    liveKey: (await createKey(ctx, project.id, 'live')).key,
    testKey: (await createKey(ctx, project.id, 'test')).key,
  };
}

export interface HttpResult {
  status: number;
  headers: Headers;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  body: any;
  text: string;
}

/** POSTs JSON (or a raw string, or raw bytes that need not be UTF-8) with an optional bearer key. */
export async function post(
  baseUrl: string,
  pathname: string,
  opts: {
    key?: string | null;
    json?: unknown;
    raw?: string | Uint8Array;
    headers?: Record<string, string>;
  } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  const res = await fetch(baseUrl + pathname, {
    method: 'POST',
    headers,
    body:
      (opts.raw as BodyInit | undefined) ??
      (opts.json === undefined ? undefined : JSON.stringify(opts.json)),
    // A stuck server fails the test in seconds instead of stalling the whole file.
    signal: AbortSignal.timeout(HANG_GUARD_MS),
  });
  return toResult(res);
}

export async function get(baseUrl: string, pathname: string): Promise<HttpResult> {
  return toResult(await fetch(baseUrl + pathname, { signal: AbortSignal.timeout(HANG_GUARD_MS) }));
}

/** A fetch answer read whole: status, headers, the text, and the body parsed when it is JSON. */
export async function toResult(res: Response): Promise<HttpResult> {
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

/** A minimal valid Message, to be varied by each test. */
export function validMessage(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    from: 'Sender <sender@example.com>',
    to: 'rcpt@example.org',
    subject: 'Hello',
    text: 'Hello there',
    ...overrides,
  };
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON when it is one JSON object. */
  json: any;
}

/** The environment that points the CLI at a test server's store: its state directory and, on PostgreSQL, its database. */
export function cliEnv(p: Pick<TestPostern, 'stateDir' | 'config'>): Record<string, string> {
  const { store } = p.config;
  return {
    POSTERN_STATE_DIR: p.stateDir,
    ...(store.backend === 'postgres'
      ? { POSTERN_STORE_BACKEND: 'postgres', POSTERN_DATABASE_URL: store.postgres.url! }
      : {}),
  };
}

/** Runs the real `postern` CLI as a child process (`input`: written to its standard input; `cli`: another checkout's bin/postern.js). */
export async function runCli(
  args: string[],
  env: Record<string, string> = {},
  input?: string,
  cli = cliPath,
): Promise<CliResult> {
  // POSTERN_TEST_STORE=postgres: the state directory's database, as its server uses.
  if (testStore() === 'postgres' && env.POSTERN_STATE_DIR && !env.POSTERN_DATABASE_URL) {
    env = {
      POSTERN_STORE_BACKEND: 'postgres',
      POSTERN_DATABASE_URL: (await databaseFor(env.POSTERN_STATE_DIR)).url,
      ...env,
    };
  }
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], {
      env: { ...process.env, POSTERN_LOG_LEVEL: 'warn', ...env },
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (input !== undefined) child.stdin!.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code: code ?? -1, stdout, stderr, json });
    });
  });
}

export interface SpawnedPostern {
  child: ChildProcess;
  listeners: BoundListener[];
  production: string;
  sandbox: string;
  stderr(): string;
  /** SIGTERM and wait for a clean exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: the crash the durability promise is about. */
  kill(): Promise<void>;
}

/** POSTERN_LISTEN_* = host:0 for every listener of the default config: parallel test servers never collide. */
export function ephemeralListenerEnv(): Record<string, string> {
  const config = JSON.parse(
    readFileSync(path.join(repoRoot, 'config', 'default.json'), 'utf8'),
  ) as { listeners: { name: string; host: string }[] };
  return Object.fromEntries(config.listeners.map((l) => [listenerEnvName(l.name), `${l.host}:0`]));
}

/** `postern start --json` as a real process on ephemeral ports. */
export async function spawnPostern(
  stateDir: string,
  env: Record<string, string> = {},
  args: string[] = [],
  opts: { logFile?: string; delivery?: boolean; openFileLimit?: number; cli?: string } = {},
): Promise<SpawnedPostern> {
  // A log file keeps a chatty server from costing the parent CPU (benchmarks).
  const logFd = opts.logFile ? openSync(opts.logFile, 'a') : null;
  // Without a config of the test's own, delivery stays off unless asked for.
  // POSTERN_TEST_STORE=postgres: the state directory's database, unless the test names a store itself.
  if (testStore() === 'postgres' && !env.POSTERN_DATABASE_URL) {
    env = {
      ...env,
      POSTERN_STORE_BACKEND: 'postgres',
      POSTERN_DATABASE_URL: (await databaseFor(stateDir)).url,
    };
  }
  if (!env.POSTERN_CONFIG && !opts.delivery) {
    mkdirSync(stateDir, { recursive: true });
    const file = path.join(stateDir, 'test-config.json');
    // Generous request limits, as startTestPostern's: on PostgreSQL the windows are the cluster's
    // and outlive a restart, so a suite that restarts a server under load would trip them.
    writeFileSync(
      file,
      JSON.stringify({
        delivery: { enabled: false },
        rate_limits: {
          send_per_key: 100_000,
          batch_per_key: 100_000,
          unauthenticated_per_ip: 100_000,
        },
      }),
    );
    env = { ...env, POSTERN_CONFIG: file };
  }
  // e.g. POSTERN_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the server.
  const nodeArgs = (process.env.POSTERN_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const argv = [...nodeArgs, opts.cli ?? cliPath, 'start', '--json', ...args];
  // A lowered `ulimit -n` for the server alone (descriptor exhaustion tests).
  const [command, commandArgs] =
    opts.openFileLimit === undefined
      ? [process.execPath, argv]
      : [
          'sh',
          ['-c', `ulimit -n ${opts.openFileLimit} && exec "$0" "$@"`, process.execPath, ...argv],
        ];
  const child = spawn(command, commandArgs, {
    env: {
      ...process.env,
      POSTERN_STATE_DIR: stateDir,
      ...ephemeralListenerEnv(),
      POSTERN_LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', logFd ?? 'pipe'],
  });
  if (logFd !== null) closeSync(logFd);
  let stderr = '';
  child.stderr?.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  const first = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once('line', (line) => {
      rl.close();
      resolve(line);
    });
    void exited.then((code) => reject(new Error(`postern start exited with ${code}: ${stderr}`)));
  });
  const started = JSON.parse(first) as { listeners: BoundListener[] };
  const url = (env: string) =>
    started.listeners.find((l) => l.environment === env && l.protocol === 'http')?.url ?? '';
  return {
    child,
    listeners: started.listeners,
    production: url('production'),
    sandbox: url('sandbox'),
    stderr: () => stderr,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}
