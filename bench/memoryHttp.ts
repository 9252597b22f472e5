/**
 * `node dist/bench/memoryHttp.js` (after `npm run build`): the server's memory while
 * BENCH_HTTP_CLIENTS (6) clients each POST /v1/send with BENCH_HTTP_ATTACHMENT_BYTES (25 MB) of
 * attachments (decoded; three attachments, the contract's 10 MB cap each), BENCH_HTTP_ROUNDS (3)
 * times over. The server is a child process; its VmRSS is sampled from /proc every 20 ms at
 * idle and under load, and its VmHWM read at the end. The target (issue 17): growth over idle
 * below clients × 2 × the decoded size, and bounded by `http.max_inflight_body_bytes`
 * (BENCH_HTTP_BUDGET_BYTES overrides it; unset, the default applies).
 */
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import Database from 'better-sqlite3';
import { buildConfig } from '../src/config/load.js';
import { tempStateDir } from '../test/support/postern.js';
import {
  BENCH_RATE_LIMITS,
  benchProject,
  processMemoryMb,
  removeAfterBench,
  sleep,
  startBenchPostern,
} from './benchServer.js';

const CLIENTS = Number(process.env.BENCH_HTTP_CLIENTS ?? 6);
const DECODED_BYTES = Number(process.env.BENCH_HTTP_ATTACHMENT_BYTES ?? 25_000_000);
const ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS ?? 3);
const BUDGET = process.env.BENCH_HTTP_BUDGET_BYTES
  ? Number(process.env.BENCH_HTTP_BUDGET_BYTES)
  : undefined;
const MiB = 1024 * 1024;

function machine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}`;
}

/** One message whose attachments decode to `bytes` in all, in pieces of at most 10 MB. */
function messageBody(bytes: number): Buffer {
  const attachments: { filename: string; content: string }[] = [];
  for (let left = bytes, i = 0; left > 0; i++) {
    const size = Math.min(left, 10_000_000);
    const content = Buffer.alloc(size);
    for (let j = 0; j < size; j += 4)
      content.writeUInt32LE((Math.random() * 2 ** 32) >>> 0, Math.min(j, size - 4));
    attachments.push({ filename: `part-${i}.bin`, content: content.toString('base64') });
    left -= size;
  }
  return Buffer.from(
    JSON.stringify({
      from: 'Bench <bench@example.com>',
      to: 'rcpt@example.org',
      subject: 'Memory benchmark',
      text: 'Attached.',
      attachments,
    }),
  );
}

function postOnce(url: URL, key: string, body: Buffer): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': String(body.length),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }),
        );
      },
    );
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    req.end(body);
  });
}

/** Samples VmRSS of `pid` every 20 ms until stopped; returns the highest seen. */
function rssSampler(pid: number): { stop(): number } {
  let peak = processMemoryMb(pid, 'VmRSS');
  const timer = setInterval(() => {
    peak = Math.max(peak, processMemoryMb(pid, 'VmRSS'));
  }, 20);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, processMemoryMb(pid, 'VmRSS'));
    },
  };
}

async function main(): Promise<void> {
  const stateDir = tempStateDir('postern-bench-memory-http-');
  const configFile = `${stateDir}/bench.json`;
  const config: Record<string, unknown> = {
    delivery: { enabled: false },
    rate_limits: BENCH_RATE_LIMITS,
  };
  if (BUDGET !== undefined) config.http = { max_inflight_body_bytes: BUDGET };
  writeFileSync(configFile, JSON.stringify(config));
  const http_ = buildConfig({ ...config, state_dir: stateDir }, {}).http;
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configFile };
  const { key } = await benchProject(env, 'bench');
  const body = messageBody(DECODED_BYTES);
  const server = await startBenchPostern(stateDir, configFile);
  const pid = server.child.pid!;
  const url = new URL('/v1/send', server.production);
  try {
    // Idle: after one small send (the pipeline and its first writer thread warmed up).
    const small = Buffer.from(
      JSON.stringify({
        from: 'bench@example.com',
        to: 'rcpt@example.org',
        subject: 'warm-up',
        text: 'hello',
      }),
    );
    await postOnce(url, key, small);
    await sleep(2000);
    const idle = rssSampler(pid);
    await sleep(1000);
    const idleMb = idle.stop();

    const load = rssSampler(pid);
    const statuses = new Map<number, number>();
    const times: number[] = [];
    const started = performance.now();
    for (let round = 0; round < ROUNDS; round++) {
      const results = await Promise.all(
        Array.from({ length: CLIENTS }, () => postOnce(url, key, body)),
      );
      for (const r of results) {
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        times.push(r.ms);
      }
    }
    const wallS = (performance.now() - started) / 1000;
    const peakMb = load.stop();
    const hwmMb = processMemoryMb(pid, 'VmHWM');
    await sleep(2000);
    const afterMb = processMemoryMb(pid, 'VmRSS');
    await server.stop();

    const db = new Database(`${stateDir}/postern.db`, { readonly: true });
    const stored = db
      .prepare("SELECT COUNT(*) FROM messages WHERE subject = 'Memory benchmark'")
      .pluck()
      .get() as number;
    db.close();
    const accepted = statuses.get(202) ?? 0;
    if (stored < accepted)
      throw new Error(`only ${stored} rows for ${accepted} acknowledged sends`);

    const decodedMb = DECODED_BYTES / MiB;
    const growth = peakMb - idleMb;
    const target = CLIENTS * 2 * decodedMb;
    times.sort((a, b) => a - b);
    console.log(`machine: ${machine()}`);
    console.log(
      `HTTP memory: ${CLIENTS} clients × ${ROUNDS} rounds, POST /v1/send with ${(DECODED_BYTES / 1e6).toFixed(1)} MB of attachments (${(body.length / 1e6).toFixed(1)} MB JSON); ` +
        `http.max_inflight_body_bytes ${(http_.max_inflight_body_bytes / MiB).toFixed(0)} MiB, body_wait_ms ${http_.body_wait_ms}`,
    );
    console.log(
      `server VmRSS: idle ${idleMb.toFixed(0)} MiB, peak under load ${peakMb.toFixed(0)} MiB (VmHWM ${hwmMb.toFixed(0)} MiB), 2 s after ${afterMb.toFixed(0)} MiB; ` +
        `growth ${growth.toFixed(0)} MiB (target < ${CLIENTS} × 2 × ${decodedMb.toFixed(1)} MiB = ${target.toFixed(0)} MiB: ${growth < target ? 'met' : 'NOT met'})`,
    );
    console.log(
      `answers: ${[...statuses].map(([s, n]) => `${n} × ${s}`).join(', ')}; ${stored} rows stored; ` +
        `per request ${times[0].toFixed(0)}-${times[times.length - 1].toFixed(0)} ms (median ${times[Math.floor(times.length / 2)].toFixed(0)}), ${wallS.toFixed(1)} s in all`,
    );
    console.log(
      JSON.stringify({
        machine: machine(),
        clients: CLIENTS,
        rounds: ROUNDS,
        decoded_bytes: DECODED_BYTES,
        json_bytes: body.length,
        budget_bytes: http_.max_inflight_body_bytes,
        idle_mb: +idleMb.toFixed(1),
        peak_mb: +peakMb.toFixed(1),
        hwm_mb: +hwmMb.toFixed(1),
        growth_mb: +growth.toFixed(1),
        target_mb: +target.toFixed(1),
        statuses: Object.fromEntries(statuses),
        stored,
      }),
    );
  } finally {
    if (server.child.exitCode === null) await server.kill();
    removeAfterBench(stateDir);
  }
}

await main();
