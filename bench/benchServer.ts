/** What every bench section shares: its server process, its rate limits, and reading back the index. */
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import Database from 'better-sqlite3';
import { buildConfig } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { smtpCertificate } from '../src/tls/filePairs.js';
import {
  runCli,
  type SpawnedPostern,
  spawnPostern,
  tempStateDir,
} from '../test/support/postern.js';
import { preloadEnv, registerGcFile } from './serverThreads.js';

/** Rate limits stay on (their cost is part of what is measured) but far above any offered load. */
export const BENCH_RATE_LIMITS = {
  send_per_key: 1e9,
  batch_per_key: 1e9,
  unauthenticated_per_ip: 1e9,
};

/**
 * A Postern process on `stateDir` with `configFile` (and `extraEnv`, e.g. a node's store),
 * logging to `<stateDir>/postern.log`; killed if the bench exits first. It loads the bench's
 * preload (bench/serverThreads.ts: V8's threads named, the event loop's GC pauses counted into
 * `<stateDir>/bench-gc`), so its CPU can be read per thread kind.
 */
export async function startBenchPostern(
  stateDir: string,
  configFile?: string,
  extraEnv: Record<string, string> = {},
): Promise<SpawnedPostern> {
  const gcFile = `${stateDir}/bench-gc`;
  const env: Record<string, string> = {
    POSTERN_LOG_LEVEL: process.env.POSTERN_LOG_LEVEL ?? 'info',
    ...preloadEnv(gcFile),
    ...extraEnv,
  };
  if (configFile) env.POSTERN_CONFIG = configFile;
  const server = await spawnPostern(stateDir, env, [], { logFile: `${stateDir}/postern.log` });
  registerGcFile(server.child.pid!, gcFile);
  onBenchExit(() => {
    if (server.child.exitCode === null && server.child.signalCode === null)
      server.child.kill('SIGKILL');
  });
  return server;
}

/** The SMTP certificate pair every section of one bench run uses, Postern's and Postfix's alike. */
export interface BenchCertificate {
  certPath: string;
  keyPath: string;
}

let certificate: Promise<BenchCertificate> | null = null;

/**
 * One self-signed pair per bench run, made by the code that makes a Postern state directory's
 * own (src/tls/filePairs.ts: RSA 2048, SHA-256), so both servers in a comparison hand the
 * client the same certificate and do the same handshake work.
 */
export function benchCertificate(): Promise<BenchCertificate> {
  certificate ??= (async () => {
    const dir = tempStateDir('postern-bench-cert-');
    removeAfterBench(dir);
    const pair = await smtpCertificate(
      buildConfig({ state_dir: dir, smtp: { hostname: 'localhost' } }, {}),
      silentLogger(),
    );
    return { certPath: pair.certPath, keyPath: pair.keyPath };
  })();
  return certificate;
}

/** Postern's `smtp` config section for a bench server: the run's certificate (benchCertificate). */
export async function benchSmtpConfig(): Promise<{ tls: { cert: string; key: string } }> {
  const { certPath, keyPath } = await benchCertificate();
  return { tls: { cert: certPath, key: keyPath } };
}

/** Rows of `table` by status, read while the server may still be writing. */
export function countByStatus(
  stateDir: string,
  table: 'messages' | 'webhook_deliveries',
): Record<string, number> {
  const db = new Database(`${stateDir}/postern.db`, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const rows = db.prepare(`SELECT status, COUNT(*) AS c FROM ${table} GROUP BY status`).all() as {
      status: string;
      c: number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.status, r.c]));
  } finally {
    db.close();
  }
}

/** The `p`th percentile of ascending `sorted` (NaN when empty). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The machine a figure was measured on, for the line that reports it. */
export function machine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}`;
}

/** A memory figure of a process from /proc, in MiB (NaN once it is gone). */
export function processMemoryMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
    );
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

export const peakRssMb = (pid: number): number => processMemoryMb(pid, 'VmHWM');

/** The fields of /proc/<pid>/stat after the command name (so `[0]` is the state), or null once it is gone. */
export function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/**
 * utime + stime of a process, in seconds (NaN once it is gone); with `reaped`, plus the CPU of
 * its children it has waited for (cutime + cstime), which is where a short-lived worker's CPU
 * goes when it exits.
 */
export function cpuSeconds(pid: number, reaped = false): number {
  const fields = procStat(pid);
  if (!fields) return NaN;
  const ticks =
    Number(fields[11]) +
    Number(fields[12]) +
    (reaped ? Number(fields[13]) + Number(fields[14]) : 0);
  return ticks / 100; // USER_HZ is 100 on Linux
}

/**
 * CPU seconds so far of a process and of its live children, each with the CPU of the children it
 * has reaped (a child that exits moves into its parent's figure, so the sum does not drop). For a
 * PostgreSQL instance: the postmaster and every backend and background process it forked (each
 * starts a session of its own, so its process group would miss them).
 */
export function cpuWithChildren(pid: number): number {
  let sum = cpuSeconds(pid, true);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const fields = procStat(Number(name));
    if (fields && Number(fields[1]) === pid) sum += cpuSeconds(Number(name), true) || 0;
  }
  return sum;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const leftovers: string[] = [];
const exitSteps: (() => void)[] = [];

/**
 * A synchronous step run when the bench process exits, however it exits (the end, a thrown
 * error, Ctrl-C, SIGTERM), before the state directories are removed: stopping what the bench
 * started outside its own process (a Postfix instance, a competing writer, a server).
 */
export function onBenchExit(step: () => void): void {
  exitSteps.push(step);
  exitOnSignals();
}

process.on('exit', () => {
  for (const step of exitSteps.splice(0)) {
    try {
      step();
    } catch (err) {
      process.stderr.write(`bench clean-up: ${(err as Error).message}\n`);
    }
  }
  if (!process.env.BENCH_KEEP)
    for (const dir of leftovers) rmSync(dir, { recursive: true, force: true });
});
const EXIT_CODES: Partial<Record<NodeJS.Signals, number>> = {
  SIGINT: 130,
  SIGTERM: 143,
  SIGHUP: 129,
};

/**
 * Ends the bench for `signal` through 'exit', so the steps above run; a no-op for other signals.
 * Also for a synchronous child the signal killed (Ctrl-C reaches the whole process group),
 * where this process's own handler would only run after the code that waited on the child.
 */
export function exitOnSignal(signal: NodeJS.Signals | null): void {
  const code = signal ? EXIT_CODES[signal] : undefined;
  if (code === undefined) return;
  process.stderr.write(`bench: ${signal}, cleaning up\n`);
  process.exit(code);
}

let signalsHandled = false;

/**
 * A signal would end the process without 'exit': turn it into an exit, once there is something
 * to clean up (a helper process that imports this module, such as the webhook receiver, keeps
 * the default: it dies by the signal).
 */
function exitOnSignals(): void {
  if (signalsHandled) return;
  signalsHandled = true;
  for (const signal of Object.keys(EXIT_CODES) as NodeJS.Signals[])
    process.once(signal, () => exitOnSignal(signal));
}

/**
 * Removes a section's state directory when the whole bench ends, not between sections:
 * deleting tens of thousands of spool files at once (online discard on this disk) slows the
 * flushes of whatever section runs next, which then measures the clean-up, not Postern.
 */
export function removeAfterBench(dir: string): void {
  leftovers.push(dir);
  exitOnSignals();
}

/** One completed request of the load: when it ended, how long it took, whether it was a 202. */
export interface Completion {
  at: number;
  ms: number;
  ok: boolean;
}

/** One POST of `body` on `agent`: its status, 0 when the connection failed. */
export function postOnce(
  url: URL,
  agent: http.Agent,
  headers: Record<string, string>,
  body: Buffer,
): Promise<number> {
  return new Promise<number>((resolve) => {
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': String(body.length) } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/** `concurrency` keep-alive clients, each with one POST in flight, until `until` resolves; each completion timed. */
export function runLoad(
  url: URL,
  headers: Record<string, string>,
  body: Buffer,
  until: Promise<void>,
  concurrency: number,
): Promise<Completion[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const done: Completion[] = [];
  let stopped = false;
  void until.then(() => (stopped = true));
  const one = () => postOnce(url, agent, headers, body);
  return Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!stopped) {
        const t0 = performance.now();
        const status = await one();
        const t1 = performance.now();
        done.push({ at: t1, ms: t1 - t0, ok: status === 202 });
      }
    }),
  ).then(() => {
    agent.destroy();
    return done;
  });
}

/** A project on the pro plan with an SMTP relay account (port 9: discard, unless given) and a live key. */
export async function benchProject(
  env: Record<string, string>,
  name: string,
  relayPort = 9,
): Promise<{ projectId: string; key: string }> {
  const cli = async (args: string[]) => {
    const result = await runCli([...args, '--json'], env);
    if (result.code !== 0)
      throw new Error(`postern ${args.slice(0, 2).join(' ')} failed: ${result.stderr}`);
    return result.json as Record<string, string>;
  };
  const projectId = (await cli(['project', 'create', '--name', name, '--plan', 'pro'])).id;
  await cli([
    'provider',
    'attach',
    '--project',
    projectId,
    '--slug',
    'smtp',
    '--host',
    '127.0.0.1',
    '--port',
    String(relayPort),
    '--tls',
    'none',
  ]);
  const { key } = await cli(['key', 'create', '--project', projectId, '--mode', 'live']);
  return { projectId, key };
}
