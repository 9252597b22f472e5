/**
 * `npm run bench`: durable accepts/s and latency of POST /v1/send against a real Postern process,
 * and, in the same run, the requests/s of a no-op route (GET /healthz) on the same HTTP stack.
 * Compare the ratio, not the absolute figures: these machines are noisy.
 */
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import Database from 'better-sqlite3';
import { runCli, spawnPostern, tempStateDir } from '../test/support/postern.js';
import { measureDiskCeiling } from './diskCeiling.js';

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 10) * 1000;
const WARMUP_MS = 2000;

interface LoadResult {
  requests: number;
  ok: number;
  errors: number;
  seconds: number;
  latenciesMs: number[];
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** `CONCURRENCY` keep-alive clients, each with one request in flight, for `durationMs` after a warm-up. */
async function load(url: URL, method: 'GET' | 'POST', headers: Record<string, string>, body: Buffer | null, okStatus: number, durationMs: number): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const started = performance.now();
  const measureFrom = started + WARMUP_MS;
  const stopAt = measureFrom + durationMs;
  const result: LoadResult = { requests: 0, ok: 0, errors: 0, seconds: durationMs / 1000, latenciesMs: [] };
  const one = () =>
    new Promise<number>((resolve) => {
      const req = http.request(url, { method, agent, headers: body ? { ...headers, 'content-length': String(body.length) } : headers }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', () => resolve(0));
      req.end(body ?? undefined);
    });
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (;;) {
        const t0 = performance.now();
        if (t0 >= stopAt) return;
        const status = await one();
        const t1 = performance.now();
        if (t0 < measureFrom) continue;
        result.requests++;
        result.latenciesMs.push(t1 - t0);
        if (status === okStatus) result.ok++;
        else result.errors++;
      }
    }),
  );
  agent.destroy();
  result.latenciesMs.sort((a, b) => a - b);
  return result;
}

function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmHWM:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) / 1024 : NaN;
}

function machine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}`;
}

async function main(): Promise<void> {
  const stateDir = tempStateDir('postern-bench-');
  const env = { POSTERN_STATE_DIR: stateDir };
  const project = (await runCli(['project', 'create', '--name', 'bench', '--plan', 'pro', '--json'], env)).json as { id: string };
  const key = (await runCli(['key', 'create', '--project', project.id, '--mode', 'live', '--json'], env)).json as { key: string };
  const server = await spawnPostern(stateDir, { POSTERN_LOG_LEVEL: process.env.POSTERN_LOG_LEVEL ?? 'info' }, [], { logFile: `${stateDir}/postern.log` });
  try {
    const text = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(18).slice(0, 1024);
    const body = Buffer.from(JSON.stringify({ from: 'Bench <bench@example.com>', to: 'rcpt@example.org', subject: 'Benchmark message', text }));
    const sendHeaders = { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' };

    const disk = await measureDiskCeiling(`${stateDir}/disk-probe`, 4, 3);
    const noop = await load(new URL('/healthz', server.production), 'GET', {}, null, 200, DURATION_MS);
    const send = await load(new URL('/v1/send', server.production), 'POST', sendHeaders, body, 202, DURATION_MS);
    const rss = peakRssMb(server.child.pid!);
    await server.stop();

    const db = new Database(`${stateDir}/postern.db`, { readonly: true });
    const stored = db.prepare('SELECT COUNT(*) AS c FROM messages').pluck().get() as number;
    db.close();

    const sendRate = send.ok / send.seconds;
    const noopRate = noop.ok / noop.seconds;
    const report = {
      machine: machine(),
      concurrency: CONCURRENCY,
      seconds: DURATION_MS / 1000,
      send: {
        accepts_per_s: Math.round(sendRate),
        p50_ms: +percentile(send.latenciesMs, 50).toFixed(2),
        p99_ms: +percentile(send.latenciesMs, 99).toFixed(2),
        errors: send.errors,
        body_bytes: body.length,
      },
      noop: { requests_per_s: Math.round(noopRate), p50_ms: +percentile(noop.latenciesMs, 50).toFixed(2), p99_ms: +percentile(noop.latenciesMs, 99).toFixed(2) },
      send_to_noop_ratio: +(sendRate / noopRate).toFixed(3),
      disk_fsynced_files_per_s: Math.round(disk),
      send_to_disk_ratio: +(sendRate / disk).toFixed(3),
      server_peak_rss_mb: +rss.toFixed(1),
      rows_stored: stored,
    };
    console.log(`machine: ${report.machine}`);
    console.log(`POST /v1/send (1 KB text, ${CONCURRENCY} clients, ${report.seconds}s): ${report.send.accepts_per_s} durable accepts/s, p50 ${report.send.p50_ms} ms, p99 ${report.send.p99_ms} ms, errors ${report.send.errors}`);
    console.log(`GET /healthz (no-op, same stack): ${report.noop.requests_per_s} req/s, p50 ${report.noop.p50_ms} ms, p99 ${report.noop.p99_ms} ms`);
    console.log(`disk ceiling (create+write+fsync+rename of 1.5 KB, 4 threads, no server): ${report.disk_fsynced_files_per_s} files/s`);
    console.log(`ratios: send/no-op ${report.send_to_noop_ratio}, send/disk ${report.send_to_disk_ratio}; server peak RSS ${report.server_peak_rss_mb} MiB; rows stored ${stored}`);
    console.log(JSON.stringify(report));
  } finally {
    if (server.child.exitCode === null) await server.kill();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

await main();
