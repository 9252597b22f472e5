/**
 * A private PostgreSQL instance: Debian's `postgresql` binaries (initdb, pg_ctl) on a temp
 * directory, run as the `postgres` OS user when we are root, on 127.0.0.1 and a free port, with a
 * password, and durable (fsync, synchronous commit and full-page writes on, as in production).
 * The tests (test/support/postgres.ts) and the bench (bench/cluster.ts) start theirs with it;
 * it is stopped and its directory removed when the process exits, however it exits.
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface PostgresInstance {
  /** The superuser's URL to the `postgres` database (postgres://postgres:password@127.0.0.1:port/postgres). */
  url: string;
  /** The postmaster's pid: every other process of the instance is its child. */
  pid: number;
  /** The major version the binaries came from (the directory under /usr/lib/postgresql). */
  version: string;
  /** What the instance was started with besides initdb's defaults (postgresql.conf lines). */
  settings: string[];
  /** Stops the instance (a clean shutdown) and removes its directory. */
  stop(): Promise<void>;
  /**
   * `pg_ctl stop -m <mode>`, keeping the directory and port for `start()`: the first half of a
   * restart or a failover (fast: every backend is told to end and the server checkpoints;
   * immediate: every backend is killed, and the next start recovers from the WAL).
   */
  halt(mode: 'fast' | 'immediate'): Promise<void>;
  /** Starts a halted instance again, on its port, and resolves once it takes connections. */
  start(): Promise<void>;
}

const POSTGRES_ROOT = '/usr/lib/postgresql';

/** Durability as in production: a commit is on disk before it is acknowledged. */
export const DURABLE_SETTINGS = ['fsync = on', 'synchronous_commit = on', 'full_page_writes = on'];

/** The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl, or null. */
export function postgresBinDir(): string | null {
  if (!existsSync(POSTGRES_ROOT)) return null;
  const versions = readdirSync(POSTGRES_ROOT)
    .filter(
      (v) =>
        existsSync(path.join(POSTGRES_ROOT, v, 'bin', 'initdb')) &&
        existsSync(path.join(POSTGRES_ROOT, v, 'bin', 'pg_ctl')),
    )
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  return versions.length > 0 ? path.join(POSTGRES_ROOT, versions[0], 'bin') : null;
}

function hasPostgresUser(): boolean {
  return readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .some((l) => l.startsWith('postgres:'));
}

/** Why no private instance can start here, or false when one can. */
export function privatePostgresUnavailable(): string | false {
  if (postgresBinDir() === null)
    return `no PostgreSQL server binaries in ${POSTGRES_ROOT}/*/bin (Debian package postgresql)`;
  if (process.getuid?.() === 0 && !hasPostgresUser())
    return 'running as root without a postgres user to run PostgreSQL as';
  return false;
}

/** The OS user an instance runs as: root may not run PostgreSQL, so it runs as `postgres`. */
function serverUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line)
    throw new Error(
      'running as root, but there is no postgres user to run PostgreSQL as (Debian package postgresql creates it)',
    );
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Synchronous clean-up steps, run when the process exits however it exits. */
const exitSteps = new Set<() => void>();
let exitHooked = false;

/** Runs `step` when the process exits (a signal included); the returned function cancels it. */
export function onProcessExit(step: () => void): () => void {
  exitSteps.add(step);
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', () => {
      for (const s of exitSteps) {
        try {
          s();
        } catch (err) {
          process.stderr.write(`postgres clean-up: ${(err as Error).message}\n`);
        }
      }
    });
    // A signal would end the process without 'exit' (and pg_ctl's postmaster runs in a session
    // of its own, so it would outlive us): turn it into an exit.
    for (const [signal, code] of [
      ['SIGINT', 130],
      ['SIGTERM', 143],
      ['SIGHUP', 129],
    ] as const)
      process.once(signal, () => process.exit(code));
  }
  return () => exitSteps.delete(step);
}

/** A free TCP port on 127.0.0.1 (taken by the server a moment later; a clash is retried). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) =>
    server.once('error', reject).listen(0, '127.0.0.1', resolve),
  );
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Runs one of PostgreSQL's programs, as `user` when given; throws with its output on failure. */
function runAs(user: { uid: number; gid: number } | null, program: string, args: string[]): string {
  const r = spawnSync(program, args, {
    encoding: 'utf8',
    timeout: 120_000,
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    // PostgreSQL's programs complain when they cannot read the working directory.
    cwd: '/',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' },
  });
  if (r.error) throw r.error;
  if (r.status !== 0)
    throw new Error(
      `${path.basename(program)} ${args[0] ?? ''} exited ${r.status ?? r.signal}: ${`${r.stdout}${r.stderr}`.trim()}`,
    );
  return r.stdout;
}

/** runAs without blocking the caller's event loop (its clients and servers keep running meanwhile). */
function runAsync(
  user: { uid: number; gid: number } | null,
  program: string,
  args: string[],
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      program,
      args,
      {
        encoding: 'utf8',
        timeout: 120_000,
        ...(user ? { uid: user.uid, gid: user.gid } : {}),
        cwd: '/',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' },
      },
      (err, stdout, stderr) =>
        err
          ? reject(
              new Error(
                `${path.basename(program)} ${args[0] ?? ''} failed: ${err.message} ${`${stdout}${stderr}`.trim()}`,
              ),
            )
          : resolve(stdout),
    );
  });
}

/**
 * Starts a private instance: durable (DURABLE_SETTINGS, which `settings` cannot turn off: they
 * come last), on 127.0.0.1 only, on a free port, with a password (SCRAM), its socket in its own
 * directory, plus `settings` (postgresql.conf lines, e.g. a small footprint for the tests).
 */
export async function startPostgresInstance(settings: string[] = []): Promise<PostgresInstance> {
  const bin = postgresBinDir();
  const unavailable = privatePostgresUnavailable();
  if (!bin || unavailable) throw new Error(String(unavailable));
  const user = serverUser();
  const dir = mkdtempSync(path.join(tmpdir(), 'postern-pg-'));
  const dataDir = path.join(dir, 'data');
  const password = randomBytes(18).toString('base64url');
  let started = false;
  const stopNow = () => {
    if (started) {
      // -m fast: clients are disconnected, then a clean shutdown (a checkpoint), and -w waits for it.
      try {
        runAs(user, path.join(bin, 'pg_ctl'), [
          'stop',
          '-D',
          dataDir,
          '-m',
          'fast',
          '-w',
          '-t',
          '60',
        ]);
      } catch {
        runAs(user, path.join(bin, 'pg_ctl'), [
          'stop',
          '-D',
          dataDir,
          '-m',
          'immediate',
          '-w',
          '-t',
          '30',
        ]);
      }
      started = false;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const cancelExitStep = onProcessExit(stopNow);
  const conf = path.join(dataDir, 'postern.conf');
  try {
    if (user) chownSync(dir, user.uid, user.gid);
    const passwordFile = path.join(dir, 'password');
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    if (user) chownSync(passwordFile, user.uid, user.gid);
    // --no-sync: initdb's own flush of the fresh cluster buys nothing in a throw-away directory
    // (the server below runs with fsync on). Local (socket) connections are trusted: the socket
    // sits in this 0700 directory; TCP ones need the password.
    runAs(user, path.join(bin, 'initdb'), [
      '-D',
      dataDir,
      '-U',
      'postgres',
      '--pwfile',
      passwordFile,
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
      // The C locale: text sorts by bytes, as SQLite's BINARY collation does.
      '-E',
      'UTF8',
      '--locale=C',
      '--no-sync',
      '--no-instructions',
    ]);
    rmSync(passwordFile);
    appendFileSync(path.join(dataDir, 'postgresql.conf'), "\ninclude = 'postern.conf'\n");
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      writeFileSync(
        conf,
        [
          `listen_addresses = '127.0.0.1'`,
          `port = ${port}`,
          `unix_socket_directories = '${dir}'`,
          ...settings,
          ...DURABLE_SETTINGS,
          '',
        ].join('\n'),
      );
      try {
        runAs(user, path.join(bin, 'pg_ctl'), [
          'start',
          '-D',
          dataDir,
          '-l',
          path.join(dir, 'server.log'),
          '-w',
          '-t',
          '60',
        ]);
        started = true;
        break;
      } catch (err) {
        // pg_ctl -w waits for a postmaster.pid; a port taken meanwhile fails the start.
        if (attempt >= 3 || !/could not (bind|create listen)/i.test(serverLog(dir)))
          throw new Error(`${(err as Error).message}\n${serverLog(dir)}`);
      }
    }
  } catch (err) {
    stopNow();
    cancelExitStep();
    throw err;
  }
  const port = /port = (\d+)/.exec(readFileSync(conf, 'utf8'))![1];
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    // postmaster.pid: its first line is the postmaster's pid.
    pid: Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]),
    version: path.basename(path.dirname(bin)),
    settings: [...settings, ...DURABLE_SETTINGS],
    async stop() {
      stopNow();
      cancelExitStep();
    },
    async halt(mode) {
      if (!started) return;
      await runAsync(user, path.join(bin, 'pg_ctl'), [
        'stop',
        '-D',
        dataDir,
        '-m',
        mode,
        '-w',
        '-t',
        '60',
      ]);
      started = false;
    },
    async start() {
      if (started) return;
      await runAsync(user, path.join(bin, 'pg_ctl'), [
        'start',
        '-D',
        dataDir,
        '-l',
        path.join(dir, 'server.log'),
        '-w',
        '-t',
        '60',
      ]);
      started = true;
    },
  };
}

function serverLog(dir: string): string {
  const file = path.join(dir, 'server.log');
  return existsSync(file)
    ? readFileSync(file, 'utf8').trim().split('\n').slice(-10).join('\n')
    : '';
}
