/** What every bench section shares: its server process, its rate limits, and reading back the index. */
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import Database from 'better-sqlite3';
import { spawnPostern, type SpawnedPostern } from '../test/support/postern.js';

/** Rate limits stay on (their cost is part of what is measured) but far above any offered load. */
export const BENCH_RATE_LIMITS = { send_per_key: 1e9, batch_per_key: 1e9, unauthenticated_per_ip: 1e9 };

/** A Postern process on `stateDir` with `configFile`, logging to `<stateDir>/postern.log`. */
export function startBenchPostern(stateDir: string, configFile?: string): Promise<SpawnedPostern> {
  const env: Record<string, string> = { POSTERN_LOG_LEVEL: process.env.POSTERN_LOG_LEVEL ?? 'info' };
  if (configFile) env.POSTERN_CONFIG = configFile;
  return spawnPostern(stateDir, env, [], { logFile: `${stateDir}/postern.log` });
}

/** Rows of `table` by status, read while the server may still be writing. */
export function countByStatus(stateDir: string, table: 'messages' | 'webhook_deliveries'): Record<string, number> {
  const db = new Database(`${stateDir}/postern.db`, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const rows = db.prepare(`SELECT status, COUNT(*) AS c FROM ${table} GROUP BY status`).all() as { status: string; c: number }[];
    return Object.fromEntries(rows.map((r) => [r.status, r.c]));
  } finally {
    db.close();
  }
}

/** The machine a figure was measured on, for the line that reports it. */
export function machine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}`;
}

/** A memory figure of a process from /proc, in MiB (NaN once it is gone). */
export function processMemoryMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

export const peakRssMb = (pid: number): number => processMemoryMb(pid, 'VmHWM');

/** utime + stime of a process, in seconds (NaN once it is gone). */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return NaN;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const leftovers: string[] = [];
process.on('exit', () => {
  if (!process.env.BENCH_KEEP) for (const dir of leftovers) rmSync(dir, { recursive: true, force: true });
});

/**
 * Removes a section's state directory when the whole bench ends, not between sections:
 * deleting tens of thousands of spool files at once (online discard on this disk) slows the
 * flushes of whatever section runs next, which then measures the clean-up, not Postern.
 */
export function removeAfterBench(dir: string): void {
  leftovers.push(dir);
}

/** One completed request of the load: when it ended, how long it took, whether it was a 202. */
export interface Completion {
  at: number;
  ms: number;
  ok: boolean;
}

/** One POST of `body` on `agent`: its status, 0 when the connection failed. */
export function postOnce(url: URL, agent: http.Agent, headers: Record<string, string>, body: Buffer): Promise<number> {
  return new Promise<number>((resolve) => {
    const req = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/** `concurrency` keep-alive clients, each with one POST in flight, until `until` resolves; each completion timed. */
export function runLoad(url: URL, headers: Record<string, string>, body: Buffer, until: Promise<void>, concurrency: number): Promise<Completion[]> {
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
