/**
 * The HTTP load the send phases offer (bench/run.ts, bench/cluster.ts): `BENCH_CONCURRENCY`
 * keep-alive clients, each with one request in flight, after a warm-up; wrk when installed
 * (bench/wrk.ts), else Node's http client.
 */
import http from 'node:http';
import { percentile } from './benchServer.js';
import { runWrk, wrkAvailable } from './wrk.js';

export const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
export const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
export const WARMUP_MS = Number(process.env.BENCH_WARMUP_SECONDS ?? 5) * 1000;

/** The /v1/send body every send phase posts: a 1 KB text message. */
export const SEND_BODY = Buffer.from(
  JSON.stringify({
    from: 'Bench <bench@example.com>',
    to: 'rcpt@example.org',
    subject: 'Benchmark message',
    text: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(18).slice(0, 1024),
  }),
);

export interface LoadResult {
  requests: number;
  ok: number;
  errors: number;
  seconds: number;
  latenciesMs: number[];
  /** wrk reports percentiles, not each latency. */
  percentilesMs?: { 50: number; 99: number };
}

/** The clients `load` runs against `servers` servers: CONCURRENCY shared evenly, the same number on each (so 51 on three). */
export function clientsFor(servers: number): number {
  return Math.max(1, Math.round(CONCURRENCY / servers)) * servers;
}

/**
 * `clientsFor(urls.length)` keep-alive clients, each with one request in flight and each on one
 * of `urls` in turn (one server's listener each), for `durationMs` after a WARMUP_MS warm-up;
 * `onMeasureStart` is called as the measured window opens; with wrk (which runs the warm-up and
 * the window as two runs) the window's run starts once the promise it returns settles, so a
 * probe can attach to the server between them, after the warm-up has started its threads.
 */
export async function load(
  urls: URL[],
  method: 'GET' | 'POST',
  headers: Record<string, string>,
  body: Buffer | null,
  okStatus: number,
  durationMs: number,
  onMeasureStart: () => void | Promise<void> = () => {},
): Promise<LoadResult> {
  const clients = clientsFor(urls.length);
  if (wrkAvailable()) {
    runWrk(urls, method, headers, body, clients, WARMUP_MS / 1000);
    await onMeasureStart();
    const r = runWrk(urls, method, headers, body, clients, durationMs / 1000);
    return {
      requests: r.requests,
      ok: r.requests - r.errors,
      errors: r.errors,
      seconds: r.seconds,
      latenciesMs: [],
      percentilesMs: { 50: r.p50Ms, 99: r.p99Ms },
    };
  }
  // maxSockets is per server: each gets its share of the clients.
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients / urls.length });
  const started = performance.now();
  const measureFrom = started + WARMUP_MS;
  const stopAt = measureFrom + durationMs;
  const result: LoadResult = {
    requests: 0,
    ok: 0,
    errors: 0,
    seconds: durationMs / 1000,
    latenciesMs: [],
  };
  let opened: Promise<void> = Promise.resolve();
  const windowOpens = setTimeout(() => {
    opened = Promise.resolve(onMeasureStart());
  }, WARMUP_MS);
  const one = (url: URL) =>
    new Promise<number>((resolve) => {
      const req = http.request(
        url,
        {
          method,
          agent,
          headers: body ? { ...headers, 'content-length': String(body.length) } : headers,
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', () => resolve(0));
      req.end(body ?? undefined);
    });
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      const url = urls[client % urls.length];
      for (;;) {
        const t0 = performance.now();
        if (t0 >= stopAt) return;
        const status = await one(url);
        const t1 = performance.now();
        if (t0 < measureFrom) continue;
        result.requests++;
        result.latenciesMs.push(t1 - t0);
        if (status === okStatus) result.ok++;
        else result.errors++;
      }
    }),
  );
  clearTimeout(windowOpens);
  await opened;
  agent.destroy();
  result.latenciesMs.sort((a, b) => a - b);
  return result;
}

/** A load's figures as the report gives them. */
export const summary = (r: LoadResult) => ({
  per_s: Math.round(r.ok / r.seconds),
  p50_ms: +(r.percentilesMs?.[50] ?? percentile(r.latenciesMs, 50)).toFixed(2),
  p99_ms: +(r.percentilesMs?.[99] ?? percentile(r.latenciesMs, 99)).toFixed(2),
  errors: r.errors,
});
