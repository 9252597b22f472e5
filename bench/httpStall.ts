/**
 * `node dist/bench/httpStall.js` (after `npm run build`): how long other clients wait while the
 * server refuses hostile JSON bodies (issue 17): a body of 1,000,000 unknown top-level keys
 * (13.9 MB), one unknown key of 5 MB, 10 MB of nested brackets. While each is posted, a second
 * client asks GET /healthz every 10 ms on a keep-alive connection; the report gives the answer
 * to the hostile body (status, size, time) and the /healthz latencies meanwhile. The server is a
 * child process, and so is the hostile client (curl).
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { runCli, tempStateDir } from '../test/support/postern.js';
import { BENCH_RATE_LIMITS, removeAfterBench, sleep, startBenchPostern } from './benchServer.js';

function machine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}`;
}

const base = '"from":"bench@example.com","to":"rcpt@example.org","subject":"s","text":"t"';
const BODIES: [string, () => Buffer][] = [
  [
    '1,000,000 unknown top-level keys',
    () => {
      const parts: string[] = [];
      for (let i = 0; i < 1_000_000; i++) parts.push(`"k${i}":1`);
      return Buffer.from(`{${base},${parts.join(',')}}`);
    },
  ],
  ['one unknown key of 5 MB', () => Buffer.from(`{${base},"${'x'.repeat(5_000_000)}":1}`)],
  [
    '10 MB of nested brackets under metadata',
    () => Buffer.from(`{${base},"metadata":${'['.repeat(5_000_000)}${']'.repeat(5_000_000)}}`),
  ],
];

/**
 * POSTs the file with curl: the hostile client is a process of its own, so its work (and its
 * garbage collection) never delays the probe measured here.
 */
function post(
  url: URL,
  key: string,
  file: string,
): Promise<{ status: number; bytes: number; ms: number }> {
  return new Promise((resolve) => {
    execFile(
      'curl',
      [
        '-s',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code} %{size_download} %{time_total}',
        '-H',
        `authorization: Bearer ${key}`,
        '-H',
        'content-type: application/json',
        '--data-binary',
        `@${file}`,
        url.href,
      ],
      (_err, stdout) => {
        const [status, bytes, seconds] = stdout.trim().split(' ').map(Number);
        resolve({ status, bytes, ms: seconds * 1000 });
      },
    );
  });
}

/** GET /healthz every 10 ms, one at a time, until stopped; returns each latency. */
function healthProbe(url: URL): { stop(): Promise<number[]> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      await new Promise<void>((resolve) => {
        http
          .get(url, { agent }, (res) => {
            res.resume();
            res.on('end', () => resolve());
          })
          .on('error', () => resolve());
      });
      latencies.push(performance.now() - t0);
      await sleep(10);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      return latencies.sort((a, b) => a - b);
    },
  };
}

async function main(): Promise<void> {
  const stateDir = tempStateDir('postern-bench-stall-');
  const configFile = `${stateDir}/bench.json`;
  writeFileSync(
    configFile,
    JSON.stringify({ delivery: { enabled: false }, rate_limits: BENCH_RATE_LIMITS }),
  );
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configFile };
  const project = (
    await runCli(['project', 'create', '--name', 'bench', '--plan', 'pro', '--json'], env)
  ).json as { id: string };
  const key = (
    (await runCli(['key', 'create', '--project', project.id, '--mode', 'test', '--json'], env))
      .json as { key: string }
  ).key;
  const server = await startBenchPostern(stateDir, configFile);
  try {
    console.log(`machine: ${machine()}`);
    // The probe alone first: what this machine's load does to /healthz with nothing to refuse.
    for (let i = 0; i < 2; i++) {
      const probe = healthProbe(new URL('/healthz', server.sandbox));
      await sleep(600);
      const health = await probe.stop();
      console.log(
        `no hostile body (0.6 s): GET /healthz (${health.length} probes): p50 ${health[Math.floor(health.length / 2)].toFixed(1)} ms, max ${health[health.length - 1].toFixed(1)} ms`,
      );
    }
    // Each body twice: the first post of a kind also pays for compiling the code that refuses it.
    for (const [name, build] of BODIES.flatMap((b) => [b, b])) {
      const body = build();
      const file = path.join(stateDir, 'body.json');
      writeFileSync(file, body);
      const probe = healthProbe(new URL('/healthz', server.sandbox));
      await sleep(200);
      const answer = await post(new URL('/v1/send', server.sandbox), key, file);
      await sleep(200);
      const health = await probe.stop();
      const p = (q: number) =>
        health[Math.min(health.length - 1, Math.floor(q * health.length))].toFixed(1);
      console.log(
        `${name} (${(body.length / 1e6).toFixed(1)} MB): ${answer.status}, ${answer.bytes} bytes, ${answer.ms.toFixed(0)} ms; ` +
          `GET /healthz meanwhile (${health.length} probes): p50 ${p(0.5)} ms, p99 ${p(0.99)} ms, max ${health[health.length - 1].toFixed(1)} ms`,
      );
    }
  } finally {
    await server.stop();
    removeAfterBench(stateDir);
  }
}

await main();
