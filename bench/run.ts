/**
 * `npm run bench`: durable accepts/s and latency of POST /v1/send against a real Postern process,
 * and, in the same run, the requests/s of a no-op route (GET /healthz) on the same HTTP stack,
 * and SMTP ingest (bench/smtp.ts: 2 KB messages, 20 STARTTLS + AUTH sessions) and end-to-end
 * relay, each phase beside a private Postfix instance's (bench/postfixComparison.ts), also
 * with a competing writer on the filesystem; and a SQLite node beside one and three nodes on a
 * private PostgreSQL (bench/cluster.ts).
 * Compare the ratio, not the absolute figures: these machines are noisy.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tempStateDir } from '../test/support/postern.js';
import {
  BENCH_RATE_LIMITS,
  benchProject,
  machine,
  peakRssMb,
  removeAfterBench,
  startBenchPostern,
} from './benchServer.js';
import { clusterBench, clusterLines } from './cluster.js';
import { consoleBench, consoleLines } from './console.js';
import { measureDiskCeiling, measureGroupCeiling } from './diskCeiling.js';
import { fileCreationLine, settleFileCreation } from './fileCreation.js';
import {
  CONCURRENCY,
  DURATION_MS,
  type LoadResult,
  load,
  SEND_BODY,
  summary,
  WARMUP_MS,
} from './httpLoad.js';
import { scrapeBench } from './metricsScrape.js';
import { comparisonLines, postfixComparison, withoutLatencies } from './postfixComparison.js';
import { relayLines, relayQueuePhase, relayThroughputPhase } from './relay.js';
import { type PosternCost, posternProbe } from './serverCost.js';
import { type SmtpIngestResult, smtpIngestPhase } from './smtp.js';
import {
  comparisonTermsOf,
  mergePosternCosts,
  sendTerms,
  type Terms,
  termsLines,
} from './terms.js';
import { webConsoleBench, webConsoleLines } from './webConsole.js';
import { webhookBench, webhookLines } from './webhooks.js';
import { wrkAvailable } from './wrk.js';

interface Phase {
  policy: boolean;
  metrics: boolean;
  result: LoadResult;
  peakRssMb: number;
  /** Scrapes of GET /metrics during the phase (metrics on), and the slowest one. */
  scrapes?: { count: number; maxMs: number };
  /** The server's CPU per thread kind and flushes over the window, per durable accept. */
  cost: PosternCost;
}

/**
 * `load` with a probe of the server (bench/serverCost.ts): attached and opened as the measured
 * window opens, closed with it; its figures per `ok` response of the window.
 */
async function probedLoad(
  pid: number,
  ...args: Parameters<typeof load>
): Promise<{ result: LoadResult; cost: PosternCost }> {
  const probe = posternProbe([pid]);
  const [urls, method, headers, body, okStatus, durationMs] = args;
  const result = await load(urls, method, headers, body, okStatus, durationMs, async () => {
    await probe.arm();
    await probe.open();
  });
  await probe.close();
  return { result, cost: await probe.cost(result.ok) };
}

/** While metrics are on, GET /metrics is scraped this often during a send phase (Prometheus' default is 15 s). */
const SCRAPE_EVERY_MS = 1000;

/**
 * Scrapes the console's /metrics every SCRAPE_EVERY_MS until stopped, from a child process (wrk
 * runs synchronously here and would hold a timer of this process back): the cost of being
 * watched is part of the figure.
 */
function scrapeWhile(consoleUrl: string): { stop(): Promise<{ count: number; maxMs: number }> } {
  const script = `
    const seen = { count: 0, maxMs: 0 };
    let stop = false;
    process.on('SIGTERM', () => (stop = true));
    (async () => {
      while (!stop) {
        const t0 = performance.now();
        const res = await fetch(process.argv[1]);
        await res.text();
        if (res.status !== 200) throw new Error('GET /metrics answered ' + res.status);
        seen.count++;
        seen.maxMs = Math.max(seen.maxMs, performance.now() - t0);
        await new Promise((r) => setTimeout(r, ${SCRAPE_EVERY_MS}));
      }
      process.stdout.write(JSON.stringify(seen));
    })();`;
  const child = spawn(process.execPath, ['-e', script, `${consoleUrl}/metrics`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      return out ? (JSON.parse(out) as { count: number; maxMs: number }) : { count: 0, maxMs: 0 };
    },
  };
}

/** One server process per phase, on its own state dir, so phases do not inherit each other's index. */
async function sendPhase(policy: boolean, body: Buffer, metrics = true): Promise<Phase> {
  const stateDir = tempStateDir('postern-bench-');
  const configFile = `${stateDir}/bench.json`;
  // Rate limits stay on (their cost is measured) but far above the offered load.
  writeFileSync(
    configFile,
    JSON.stringify({
      delivery: { enabled: false },
      policy: { enabled: policy },
      rate_limits: BENCH_RATE_LIMITS,
      metrics: { enabled: metrics },
    }),
  );
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configFile };
  const key = await benchProject(env, 'bench');
  const server = await startBenchPostern(stateDir, configFile);
  try {
    const headers = { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' };
    const consoleUrl = server.listeners.find((l) => l.protocol === 'console')?.url;
    const scraping = metrics && consoleUrl ? scrapeWhile(consoleUrl) : null;
    const { result, cost } = await probedLoad(
      server.child.pid!,
      [new URL('/v1/send', server.production)],
      'POST',
      headers,
      body,
      202,
      DURATION_MS,
    );
    const scrapes = await scraping?.stop();
    const rss = peakRssMb(server.child.pid!);
    await server.stop();
    const db = new Database(`${stateDir}/postern.db`, { readonly: true });
    const stored = db.prepare('SELECT COUNT(*) AS c FROM messages').pluck().get() as number;
    db.close();
    if (stored < result.ok)
      throw new Error(`only ${stored} rows for ${result.ok} acknowledged sends`);
    return { policy, metrics, result, peakRssMb: rss, scrapes, cost };
  } finally {
    if (server.child.exitCode === null) await server.kill();
    removeAfterBench(stateDir);
  }
}

async function noopPhase(): Promise<{ result: LoadResult; cost: PosternCost }> {
  const stateDir = tempStateDir('postern-bench-');
  const server = await startBenchPostern(stateDir);
  try {
    return await probedLoad(
      server.child.pid!,
      [new URL('/healthz', server.production)],
      'GET',
      {},
      null,
      200,
      DURATION_MS,
    );
  } finally {
    await server.stop();
    removeAfterBench(stateDir);
  }
}

/** `BENCH_ONLY=send|metrics|scrape|smtp|relay|postfix|webhooks|console|cluster|web` runs one section (quicker to iterate on); unset runs all. */
const only = process.env.BENCH_ONLY;

async function sendOnly(): Promise<void> {
  const probeDir = tempStateDir('postern-disk-');
  const group = measureGroupCeiling(`${probeDir}/group`, 20, 3);
  removeAfterBench(probeDir);
  const phases: Phase[] = [];
  for (const policy of [true, true]) phases.push(await sendPhase(policy, SEND_BODY));
  console.log(`machine: ${machine()}; load generator: ${wrkAvailable() ? 'wrk' : 'node'}`);
  console.log(
    `disk ceiling of the spool's group publish (20 × 1.5 KB files renamed, then one syncfs; no server): ${Math.round(group)} files/s`,
  );
  for (const p of phases) {
    const s = summary(p.result);
    console.log(
      `POST /v1/send (1 KB text, ${CONCURRENCY} clients, ${DURATION_MS / 1000}s): ${s.per_s} durable accepts/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms, errors ${s.errors}, peak RSS ${p.peakRssMb.toFixed(1)} MiB`,
    );
  }
}

/**
 * `BENCH_ONLY=metrics`: the send bench with metrics on (and /metrics scraped every second) and
 * off, alternating, BENCH_PAIRS (4) pairs, a fresh server per phase; the merged figures compared.
 */
async function metricsOnly(): Promise<void> {
  // What a send adds on the event loop with metrics on, alone: its two counters (the commit
  // group's histograms are on the index writer thread, once per group).
  const { countAccepted, countHttpRequest } = await import('../src/platform/metrics.js');
  const calls = 1_000_000;
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) {
    countHttpRequest('send', '/v1/send', 202);
    countAccepted('http', 'production');
  }
  const perSendNs = ((performance.now() - t0) * 1e6) / calls;
  const phases: Phase[] = [];
  const pairs = Number(process.env.BENCH_PAIRS ?? 4);
  for (let i = 0; i < pairs; i++)
    for (const metrics of [true, false]) phases.push(await sendPhase(true, SEND_BODY, metrics));
  console.log(`machine: ${machine()}; load generator: ${wrkAvailable() ? 'wrk' : 'node'}`);
  console.log(
    `the counters one send records, alone (${calls} sends' worth): ${perSendNs.toFixed(0)} ns per send`,
  );
  for (const p of phases) {
    const s = summary(p.result);
    const scraped = p.scrapes
      ? `, ${p.scrapes.count} scrapes (slowest ${p.scrapes.maxMs.toFixed(1)} ms)`
      : '';
    console.log(
      `metrics ${p.metrics ? 'on ' : 'off'}: POST /v1/send ${s.per_s} durable accepts/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms, errors ${s.errors}${scraped}`,
    );
  }
  const rate = (on: boolean) => {
    const rs = phases.filter((p) => p.metrics === on).map((p) => p.result);
    return rs.reduce((a, r) => a + r.ok, 0) / rs.reduce((a, r) => a + r.seconds, 0);
  };
  const on = rate(true);
  const off = rate(false);
  // Each pair ran back to back: its ratio is less exposed to the machine's drift than the totals.
  const ratios = Array.from(
    { length: pairs },
    (_, i) => phases[2 * i].result.ok / phases[2 * i + 1].result.ok,
  ).sort((a, b) => a - b);
  const median = ratios[Math.floor(ratios.length / 2)];
  console.log(
    `metrics on ${Math.round(on)}/s, off ${Math.round(off)}/s (${pairs} pairs): on is ${(((on - off) / off) * 100).toFixed(1)} % against off; ` +
      `per pair on/off ${ratios.map((r) => r.toFixed(3)).join(', ')} (median ${median.toFixed(3)})`,
  );
}

async function smtpOnly(): Promise<void> {
  console.log(`machine: ${machine()}`);
  for (let i = 0; i < 2; i++) {
    const r = await smtpIngestPhase(DURATION_MS, WARMUP_MS);
    const s = summary({
      requests: r.accepted + r.errors,
      ok: r.accepted,
      errors: r.errors,
      seconds: r.seconds,
      latenciesMs: r.latenciesMs.sort((a, b) => a - b),
    });
    console.log(
      `SMTP ingest (2 KB, ${r.sessions} sessions, STARTTLS + AUTH, ${r.seconds}s): ${s.per_s} messages/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms, errors ${s.errors}; ` +
        `server peak RSS ${r.server_peak_rss_mb} MiB, CPU ${r.server_cpu.toFixed(2)} cores (generator ${r.generator_cpu.toFixed(2)})`,
    );
    if (r.error_samples.length > 0) console.log(`SMTP errors: ${r.error_samples.join(' | ')}`);
    const { cost } = r;
    const byKind = Object.entries(cost.threads_ms_per_message)
      .filter(([, v]) => v !== 0)
      .map(([k, v]) => `${k} ${v}`);
    const flushes = cost.flushes
      ? `${cost.flushes.per_message} flushes/msg`
      : `flushes not counted (${cost.flushes_unavailable})`;
    console.log(
      `  server CPU ${cost.cpu_ms_per_message} ms/msg (${byKind.join(', ')}; event-loop GC ${cost.event_loop_gc_ms_per_message}); ${flushes}`,
    );
  }
}

async function main(): Promise<void> {
  // Before any section: a run right after tests or another bench would otherwise pay for their deletions.
  const files = await settleFileCreation();
  console.log(fileCreationLine(files));
  if (only === 'send') return sendOnly();
  if (only === 'metrics') return metricsOnly();
  if (only === 'scrape') return void console.log(`machine: ${machine()}\n${await scrapeBench()}`);
  if (only === 'smtp') return smtpOnly();
  if (only === 'postfix') {
    const comparison = await postfixComparison(DURATION_MS, WARMUP_MS);
    for (const line of comparisonLines(comparison, DURATION_MS)) console.log(line);
    const terms: Terms = { ...comparisonTermsOf(comparison), send: null };
    for (const line of termsLines(terms)) console.log(line);
    console.log(JSON.stringify({ ...comparison, terms }, withoutLatencies));
    return;
  }
  if (only === 'relay') {
    console.log(`machine: ${machine()}`);
    const relay = { throughput: await relayThroughputPhase(), queue: await relayQueuePhase() };
    for (const line of relayLines(relay.throughput, relay.queue)) console.log(line);
    return;
  }
  if (only === 'console') {
    const console_ = await consoleBench();
    console.log(`machine: ${machine()}`);
    for (const line of consoleLines(console_)) console.log(line);
    console.log(JSON.stringify({ machine: machine(), console: console_ }));
    return;
  }
  if (only === 'cluster') {
    const cluster = await clusterBench();
    for (const line of clusterLines(cluster)) console.log(line);
    console.log(JSON.stringify({ machine: machine(), cluster }));
    return;
  }
  if (only === 'web') {
    // Not part of the full run: it needs chromium, and filling 100,000 messages takes a minute.
    const web = await webConsoleBench();
    console.log(`machine: ${machine()}`);
    for (const line of webConsoleLines(web)) console.log(line);
    console.log(JSON.stringify({ machine: machine(), web_console: web }));
    return;
  }
  if (only === 'webhooks') {
    const webhooks = await webhookBench();
    console.log(`machine: ${machine()}`);
    for (const line of webhookLines(webhooks)) console.log(line);
    console.log(JSON.stringify({ machine: machine(), webhooks }));
    return;
  }
  const probeDir = tempStateDir('postern-disk-');
  const diskPerFile = await measureDiskCeiling(`${probeDir}/probe`, 4, 3);
  const disk = measureGroupCeiling(`${probeDir}/group`, 20, 3);
  removeAfterBench(probeDir);
  const { result: noop, cost: noopCost } = await noopPhase();
  // Policy off and on, interleaved twice, so disk and CPU drift hits both alike.
  const phases: Phase[] = [];
  for (const policy of [false, true, false, true]) phases.push(await sendPhase(policy, SEND_BODY));
  const merged = (policy: boolean): LoadResult => {
    const rs = phases.filter((p) => p.policy === policy).map((p) => p.result);
    return {
      requests: rs.reduce((a, r) => a + r.requests, 0),
      ok: rs.reduce((a, r) => a + r.ok, 0),
      errors: rs.reduce((a, r) => a + r.errors, 0),
      seconds: rs.reduce((a, r) => a + r.seconds, 0),
      latenciesMs: rs.flatMap((r) => r.latenciesMs).sort((a, b) => a - b),
      // From wrk's percentiles: the phases' mean median and their worst p99.
      percentilesMs: rs.every((r) => r.percentilesMs)
        ? {
            50: rs.reduce((a, r) => a + r.percentilesMs![50], 0) / rs.length,
            99: Math.max(...rs.map((r) => r.percentilesMs![99])),
          }
        : undefined,
    };
  };
  // SMTP ingest, two phases (fresh server each) merged, for the same reason; each beside a
  // Postfix phase, as are end-to-end relay and both under a competing writer (bench/postfixComparison.ts).
  const comparison = await postfixComparison(DURATION_MS, WARMUP_MS);
  const smtpPhases: SmtpIngestResult[] = comparison.ingest.map((pair) => pair.postern);
  const smtpMerged: LoadResult = {
    requests: smtpPhases.reduce((a, r) => a + r.accepted + r.errors, 0),
    ok: smtpPhases.reduce((a, r) => a + r.accepted, 0),
    errors: smtpPhases.reduce((a, r) => a + r.errors, 0),
    seconds: smtpPhases.reduce((a, r) => a + r.seconds, 0),
    latenciesMs: smtpPhases.flatMap((r) => r.latenciesMs).sort((a, b) => a - b),
  };
  const on = summary(merged(true));
  const off = summary(merged(false));
  const report = {
    machine: machine(),
    file_create: files,
    concurrency: CONCURRENCY,
    seconds_per_phase: DURATION_MS / 1000,
    body_bytes: SEND_BODY.length,
    send_policy_on: on,
    send_policy_off: off,
    policy_cost_percent: +((1 - on.per_s / off.per_s) * 100).toFixed(1),
    noop: summary(noop),
    send_to_noop_ratio: +(on.per_s / summary(noop).per_s).toFixed(3),
    disk_fsync_per_file_files_per_s: Math.round(diskPerFile),
    disk_group_publish_files_per_s: Math.round(disk),
    send_to_disk_ratio: +(on.per_s / disk).toFixed(3),
    server_peak_rss_mb: +Math.max(...phases.map((p) => p.peakRssMb)).toFixed(1),
    smtp_ingest: {
      ...summary(smtpMerged),
      sessions: smtpPhases[0].sessions,
      messages_per_session: smtpPhases[0].messages_per_session,
      message_bytes: smtpPhases[0].message_bytes,
      seconds: smtpMerged.seconds,
      sessions_opened: smtpPhases.reduce((a, r) => a + r.sessions_opened, 0),
      server_peak_rss_mb: Math.max(...smtpPhases.map((r) => r.server_peak_rss_mb)),
      server_cpu_cores: +(
        smtpPhases.reduce((a, r) => a + r.server_cpu, 0) / smtpPhases.length
      ).toFixed(2),
      generator_cpu_cores: +(
        smtpPhases.reduce((a, r) => a + r.generator_cpu, 0) / smtpPhases.length
      ).toFixed(2),
      acknowledged_total: smtpPhases.reduce((a, r) => a + r.acknowledged_total, 0),
      rows_stored: smtpPhases.reduce((a, r) => a + r.rows_stored, 0),
      error_samples: smtpPhases.flatMap((r) => r.error_samples).slice(0, 5),
    },
    smtp_to_send_ratio: 0,
    smtp_to_disk_ratio: 0,
  };
  report.smtp_to_send_ratio = +(report.smtp_ingest.per_s / on.per_s).toFixed(3);
  report.smtp_to_disk_ratio = +(report.smtp_ingest.per_s / disk).toFixed(3);
  const smtp = report.smtp_ingest;
  console.log(
    `machine: ${report.machine}; HTTP load generator: ${wrkAvailable() ? 'wrk' : 'node'}`,
  );
  console.log(
    `POST /v1/send, policy on  (1 KB text, ${CONCURRENCY} clients, 2×${report.seconds_per_phase}s): ${on.per_s} durable accepts/s, p50 ${on.p50_ms} ms, p99 ${on.p99_ms} ms, errors ${on.errors}`,
  );
  console.log(
    `POST /v1/send, policy off (same, interleaved):          ${off.per_s} durable accepts/s, p50 ${off.p50_ms} ms, p99 ${off.p99_ms} ms, errors ${off.errors}`,
  );
  console.log(`policy cost: ${report.policy_cost_percent}% of accepts/s`);
  console.log(
    `GET /healthz (no-op, same stack): ${report.noop.per_s} req/s, p50 ${report.noop.p50_ms} ms, p99 ${report.noop.p99_ms} ms`,
  );
  console.log(
    `disk ceilings (1.5 KB files, no server): fsync per file (create+write+fsync+rename, 4 threads) ${report.disk_fsync_per_file_files_per_s} files/s; ` +
      `the spool's group publish (20 files renamed, then one syncfs) ${report.disk_group_publish_files_per_s} files/s`,
  );
  console.log(
    `ratios: send/no-op ${report.send_to_noop_ratio}, send/disk ${report.send_to_disk_ratio}; server peak RSS ${report.server_peak_rss_mb} MiB`,
  );
  console.log(
    `SMTP ingest (2 KB, ${smtp.sessions} sessions, ${smtp.messages_per_session} messages per session, STARTTLS + AUTH, 2×${report.seconds_per_phase}s): ` +
      `${smtp.per_s} messages/s, p50 ${smtp.p50_ms} ms, p99 ${smtp.p99_ms} ms, errors ${smtp.errors}; ` +
      `server peak RSS ${smtp.server_peak_rss_mb} MiB, CPU ${smtp.server_cpu_cores} cores (generator ${smtp.generator_cpu_cores}); ` +
      `${smtp.sessions_opened} sessions; ${smtp.rows_stored} rows stored for ${smtp.acknowledged_total} acknowledged`,
  );
  console.log(
    `ratios: smtp/send ${report.smtp_to_send_ratio}, smtp/disk ${report.smtp_to_disk_ratio}`,
  );
  if (smtp.error_samples.length > 0)
    console.log(
      `SMTP errors (first ${smtp.error_samples.length}): ${smtp.error_samples.join(' | ')}`,
    );
  // End-to-end relay (bench/relay.ts, measured beside Postfix above): accepted over HTTP and SMTP, delivered to a local sink; then a queue of BENCH_QUEUE.
  const relay = { throughput: comparison.relay.postern, queue: await relayQueuePhase() };
  for (const line of relayLines(relay.throughput, relay.queue)) console.log(line);
  for (const line of comparisonLines(comparison, DURATION_MS)) console.log(line);
  const onPhases = phases.filter((p) => p.policy);
  const terms: Terms = {
    ...comparisonTermsOf(comparison),
    send: sendTerms(
      { ...on, cost: mergePosternCosts(onPhases.map((p) => p.cost)) },
      { ...report.noop, cost: noopCost },
    ),
  };
  for (const line of termsLines(terms)) console.log(line);
  // Outbound webhooks (bench/webhooks.ts): delivery rate, and acceptance with the dispatcher idle and working.
  const webhooks = await webhookBench();
  for (const line of webhookLines(webhooks)) console.log(line);
  // Console bulk actions (bench/console.ts): a bulk retry of 10,000 messages, and acceptance meanwhile.
  const consoleFigures = await consoleBench();
  for (const line of consoleLines(consoleFigures)) console.log(line);
  // A SQLite node beside one and three nodes on PostgreSQL (bench/cluster.ts): accepts/s, relay/s, and CPU, commits and WAL per message.
  const cluster = await clusterBench();
  for (const line of clusterLines(cluster)) console.log(line);
  console.log(
    JSON.stringify(
      {
        ...report,
        relay,
        webhooks,
        console: consoleFigures,
        postfix_comparison: comparison,
        terms,
        cluster,
      },
      withoutLatencies,
    ),
  );
}

await main();
