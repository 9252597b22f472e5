/**
 * wrk (Debian package `wrk`) as the HTTP load generator when it is installed: a C client that
 * needs a fraction of the CPU Node's http client does, leaving this 2-core machine's cores to the
 * server under test. `BENCH_GENERATOR=node` forces the Node client instead.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface WrkResult {
  requests: number;
  /** Responses outside 2xx/3xx, plus connect/read/write errors and timeouts. */
  errors: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
}

export function wrkAvailable(): boolean {
  return (
    process.env.BENCH_GENERATOR !== 'node' && spawnSync('wrk', ['--version']).error === undefined
  );
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

function durationMs(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) throw new Error(`wrk: unreadable latency "${text}"`);
  return Number(m[1]) * UNIT_MS[m[2]];
}

/**
 * Runs `connections` keep-alive connections against `urls` for `seconds`: one wrk thread per URL
 * (they share its path), each with `connections / urls.length` of them on its own server.
 */
export function runWrk(
  urls: URL[],
  method: string,
  headers: Record<string, string>,
  body: Buffer | null,
  connections: number,
  seconds: number,
): WrkResult {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'postern-wrk-'));
  try {
    const lua = [
      `wrk.method = ${JSON.stringify(method)}`,
      ...Object.entries(headers).map(
        ([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`,
      ),
      body ? `wrk.body = ${JSON.stringify(body.toString('utf8'))}` : '',
      // wrk calls setup() once per thread, in order, before any connects: thread n goes to urls[n].
      ...(urls.length > 1
        ? [
            `local targets = { ${urls.map((u) => `{ ${JSON.stringify(u.hostname)}, ${JSON.stringify(u.port)} }`).join(', ')} }`,
            'local n = 0',
            'function setup(thread)',
            '  n = n + 1',
            '  local t = targets[n]',
            '  thread.addr = wrk.lookup(t[1], t[2])[1]',
            'end',
          ]
        : []),
    ].join('\n');
    writeFileSync(path.join(dir, 'request.lua'), lua);
    // --timeout: wrk's default (2 s) would count a slower answer as an error and leave it out of the
    // percentiles (a node on a loaded database answers in seconds).
    const run = spawnSync(
      'wrk',
      [
        `-t${urls.length}`,
        `-c${connections}`,
        `-d${seconds}s`,
        '--timeout',
        '30s',
        '--latency',
        '-s',
        path.join(dir, 'request.lua'),
        urls[0].href,
      ],
      { encoding: 'utf8' },
    );
    if (run.status !== 0) throw new Error(`wrk failed: ${run.stderr}`);
    const out = run.stdout;
    const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN);
    const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
    const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    const socketErrors = socket ? socket.slice(1).reduce((a, n) => a + Number(n), 0) : 0;
    const pct = (p: number) =>
      durationMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(out)?.[1] ?? 'NaN');
    return { requests, errors: non2xx + socketErrors, seconds, p50Ms: pct(50), p99Ms: pct(99) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
