/**
 * `npm run bench:memory`: the server's resident memory while many clients send big messages at
 * once. Each scenario gets a fresh Postern process: its RSS at rest after one client's share of
 * the load (code paths compiled, caches filled: that is not what is measured), then its peak
 * during the load (VmHWM, reset at the start of the load, and VmRSS polled every 20 ms, from
 * /proc/<pid>/status), the growth over idle against the scenario's target, and how the server
 * answered. `BENCH_MEMORY_ONLY=<name>` runs one scenario.
 *
 * Scenarios are rows of SCENARIOS: a name, what the load is, the growth it must stay under, and
 * the load itself, given the running server, a live key and the CLI's environment.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  post,
  repoRoot,
  runCli,
  type SpawnedPostern,
  tempStateDir,
  validMessage,
} from '../test/support/postern.js';
import { memoryOf, type PeakRss, watchPeakRss } from '../test/support/processMemory.js';
import { RawEventStream } from '../test/support/rawEventStream.js';
import type { RawSmtp } from '../test/support/rawSmtp.js';
import {
  BENCH_RATE_LIMITS,
  benchProject,
  machine,
  removeAfterBench,
  sleep,
  startBenchPostern,
} from './benchServer.js';
import { openBenchSession } from './smtpClient.js';

const MiB = 1024 * 1024;

interface Scenario {
  name: string;
  /** The load, in words, for the report. */
  load: string;
  /** Peak RSS may exceed idle RSS by less than this. */
  targetGrowthMiB: number;
  /** Settings of the scenario's own, over the bench's. */
  config?: Record<string, unknown>;
  /** One client's share of the load, before idle is measured: code paths warm, caches filled. */
  warmUp(server: SpawnedPostern, liveKey: string, cli: Record<string, string>): Promise<void>;
  /** Runs the load; resolves with how many answers of each kind the clients got. */
  run(
    server: SpawnedPostern,
    liveKey: string,
    cli: Record<string, string>,
  ): Promise<Record<string, number>>;
}

/** Counts answers by their first few characters (`554 5.6.0 text:too_long`, `250 2.0.0`, …). */
function tally(answers: string[], width: (a: string) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of answers) counts[width(a)] = (counts[width(a)] ?? 0) + 1;
  return counts;
}

/** An SMTP reply by its code, enhanced code and contract code (`text:too_long`, `server_busy`; the prose after it varies). */
const replyKind = (reply: string) =>
  /^\d{3}(?: \d\.\d\.\d)?(?: [a-z_]+(?::[a-z_]+)?)?/.exec(reply)?.[0] ?? reply.slice(0, 40);

function smtpListenerPort(server: SpawnedPostern): number {
  const listener = server.listeners.find(
    (l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'),
  );
  if (!listener) throw new Error('no production STARTTLS listener');
  return listener.port;
}

/**
 * One message with a `bodyBytes` text/plain body over an open session: MAIL, RCPT, DATA, then
 * the body 64 KiB at a time as the socket takes it (the client never holds the message), then
 * the final dot; resolves with the reply to it.
 */
async function sendLongText(client: RawSmtp, bodyBytes: number): Promise<string> {
  client.write('MAIL FROM:<bench@example.com>\r\nRCPT TO:<rcpt@example.org>\r\nDATA\r\n');
  const [mail, rcpt, data] = [await client.next(), await client.next(), await client.next()];
  if (!data.startsWith('354')) return [mail, rcpt, data].find((r) => !/^[23]/.test(r)) ?? data;
  await client.writeAll(
    'From: Bench <bench@example.com>\r\nTo: rcpt@example.org\r\nSubject: A long text body\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n',
  );
  const line = 'A long text body, sent to see what it costs the server to refuse it.\r\n';
  const block = Buffer.from(line.repeat(Math.floor((64 * 1024) / line.length)));
  // Whole lines only: the final dot must follow a line break to end DATA.
  for (let left = bodyBytes - (bodyBytes % line.length); left > 0; left -= block.length)
    await client.writeAll(block.subarray(0, Math.min(block.length, left)));
  client.write('.\r\n');
  return client.next();
}

/**
 * `count` small messages accepted as fast as the server takes them: batches of 100 (the
 * contract's most), `parallel` batches at a time; each batch's status counted.
 */
async function sends(
  server: SpawnedPostern,
  liveKey: string,
  count: number,
  parallel = 5,
): Promise<Record<string, number>> {
  const statuses: string[] = [];
  let left = count;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (left > 0) {
        const size = Math.min(100, left);
        left -= size;
        const messages = Array.from({ length: size }, () =>
          validMessage({ subject: 'stream load' }),
        );
        statuses.push(
          `batch of ${size}: ${(await post(server.production, '/v1/send/batch', { key: liveKey, json: { messages } })).status}`,
        );
      }
    }),
  );
  return tally(statuses, (s) => s);
}

const consoleOf = (server: SpawnedPostern) =>
  server.listeners.find((l) => l.protocol === 'console')!.url;

/** An owner's operator token, made with the CLI (as a script's would be). */
async function operatorToken(cli: Record<string, string>): Promise<string> {
  const email = `bench-${Math.random().toString(36).slice(2)}@example.com`;
  const op = (
    await runCli(['operator', 'create', '--email', email, '--role', 'owner', '--json'], cli)
  ).json as { id: string };
  return (
    (
      await runCli(
        ['operator', 'token', 'create', '--operator', op.id, '--name', 'bench', '--json'],
        cli,
      )
    ).json as { token: string }
  ).token;
}

const STREAM_SENDS = Number(process.env.BENCH_MEMORY_STREAM_SENDS ?? 5000);
/** Where the settings exist (issue 32), caps raised so that every stream of the scenario opens: the queue bound alone is measured. */
const consoleSettings = (
  JSON.parse(readFileSync(path.join(repoRoot, 'src', 'config', 'schema.json'), 'utf8')) as {
    properties: { console: { properties: Record<string, unknown> } };
  }
).properties.console.properties;
const streamCaps = (streams: number) =>
  'max_streams' in consoleSettings
    ? {
        console: {
          max_streams: streams + 10,
          max_streams_per_operator: streams + 10,
          max_connections: streams + 64,
          max_connections_per_ip: streams + 64,
        },
      }
    : {};

/**
 * `streams` console live-update streams (one owner's token) that never read after the response
 * head, then STREAM_SENDS messages: each one's `mail.accepted` is announced to every stream, in
 * batches of what the outbox reader finds at each poll.
 */
function streamScenario(streams: number, targetGrowthMiB: number): Scenario {
  return {
    name: `console-streams-${streams}`,
    load: `${streams} console live-update streams that never read, then ${STREAM_SENDS} messages accepted (batches of 100, 5 at a time)`,
    targetGrowthMiB,
    config: streamCaps(streams),
    // The same acceptance first (with one stream that reads): the spool writers, the index's
    // caches and the heap reach their working size, so the load's growth is the streams'.
    async warmUp(server, liveKey, cli) {
      const reader = await RawEventStream.open(consoleOf(server), {
        token: await operatorToken(cli),
        keep: () => false,
      });
      await sends(server, liveKey, STREAM_SENDS);
      await sleep(1500);
      reader.close();
    },
    async run(server, liveKey, cli) {
      const token = await operatorToken(cli);
      const open: RawEventStream[] = [];
      const statuses: string[] = [];
      for (let i = 0; i < streams; i++) {
        const s = await RawEventStream.open(consoleOf(server), { token, paused: true });
        statuses.push(`stream ${s.status}`);
        if (s.status === 200) open.push(s);
        else s.close();
      }
      try {
        const sent = await sends(server, liveKey, STREAM_SENDS);
        // The outbox is read every console.events_poll_ms (1 s): the last sends are announced too.
        await sleep(3000);
        return { ...tally(statuses, (s) => s), ...sent };
      } finally {
        for (const s of open) s.close();
      }
    },
  };
}

const SMTP_CLIENTS = Number(process.env.BENCH_MEMORY_CLIENTS ?? 50);
const TEXT_BYTES = Number(process.env.BENCH_MEMORY_TEXT_BYTES ?? 39_000_000);

const SCENARIOS: Scenario[] = [
  {
    name: 'smtp-text',
    load: `${SMTP_CLIENTS} authenticated SMTP clients at once, each sending a ${TEXT_BYTES / 1e6} MB text/plain body (over the contract's 2 MB text, under SIZE)`,
    targetGrowthMiB: 64,
    async warmUp(server, liveKey) {
      const client = await openBenchSession('127.0.0.1', smtpListenerPort(server), {
        user: 'user',
        password: liveKey,
      });
      try {
        await sendLongText(client, TEXT_BYTES);
      } finally {
        await client.quit();
      }
    },
    async run(server, liveKey) {
      const port = smtpListenerPort(server);
      const answers = await Promise.all(
        Array.from({ length: SMTP_CLIENTS }, async () => {
          const client = await openBenchSession('127.0.0.1', port, {
            user: 'user',
            password: liveKey,
          });
          try {
            return await sendLongText(client, TEXT_BYTES);
          } finally {
            await client.quit();
          }
        }),
      );
      return tally(answers, replyKind);
    },
  },
  // Warmed up, the same acceptance alone grew the server by 0.5-20 MiB over four runs.
  streamScenario(0, 48),
  streamScenario(100, 48),
  streamScenario(200, 48),
];

interface Measured {
  scenario: string;
  load: string;
  idle_rss_mib: number;
  peak_rss_mib: number;
  growth_mib: number;
  target_growth_mib: number;
  within_target: boolean;
  seconds: number;
  answers: Record<string, number>;
}

async function measure(scenario: Scenario): Promise<Measured> {
  const stateDir = tempStateDir(`postern-bench-memory-${scenario.name}-`);
  removeAfterBench(stateDir);
  const configFile = `${stateDir}/bench.json`;
  // BENCH_MEMORY_STREAMED_MESSAGES: smtp.max_streamed_messages (else the default).
  const streamed = process.env.BENCH_MEMORY_STREAMED_MESSAGES;
  const smtp = streamed ? { smtp: { max_streamed_messages: Number(streamed) } } : {};
  writeFileSync(
    configFile,
    JSON.stringify({
      rate_limits: BENCH_RATE_LIMITS,
      delivery: { enabled: false },
      ...smtp,
      ...scenario.config,
    }),
  );
  const env = { POSTERN_STATE_DIR: stateDir, POSTERN_CONFIG: configFile };
  const { key } = await benchProject(env, `bench-${scenario.name}`);
  const server = await startBenchPostern(stateDir, configFile);
  try {
    const pid = server.child.pid!;
    // Idle: after one client's share of the load, at rest.
    await scenario.warmUp(server, key, env);
    await sleep(2000);
    const idle = memoryOf(pid, 'VmRSS');
    const watch = watchPeakRss(pid);
    const started = performance.now();
    let answers: Record<string, number>;
    let rss: PeakRss;
    try {
      answers = await scenario.run(server, key, env);
    } finally {
      rss = watch.stop();
    }
    const growth = (rss.peak - idle) / MiB;
    return {
      scenario: scenario.name,
      load: scenario.load,
      idle_rss_mib: +(idle / MiB).toFixed(1),
      peak_rss_mib: +(rss.peak / MiB).toFixed(1),
      growth_mib: +growth.toFixed(1),
      target_growth_mib: scenario.targetGrowthMiB,
      within_target: growth < scenario.targetGrowthMiB,
      seconds: +((performance.now() - started) / 1000).toFixed(1),
      answers,
    };
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const only = process.env.BENCH_MEMORY_ONLY;
  const scenarios = SCENARIOS.filter((s) => !only || s.name === only);
  if (scenarios.length === 0)
    throw new Error(
      `no scenario named ${only}; there are: ${SCENARIOS.map((s) => s.name).join(', ')}`,
    );
  console.log(`machine: ${machine()}`);
  const results: Measured[] = [];
  for (const scenario of scenarios) {
    const r = await measure(scenario);
    results.push(r);
    const answers = Object.entries(r.answers)
      .map(([kind, n]) => `${n} × ${kind}`)
      .join(', ');
    console.log(
      `${r.scenario}: ${r.load}: server RSS idle ${r.idle_rss_mib} MiB, peak ${r.peak_rss_mib} MiB, growth ${r.growth_mib} MiB ` +
        `(target < ${r.target_growth_mib} MiB: ${r.within_target ? 'met' : 'NOT met'}); ${r.seconds} s; answers: ${answers}`,
    );
  }
  console.log(JSON.stringify({ machine: machine(), memory: results }));
  if (results.some((r) => !r.within_target)) process.exitCode = 1;
}

await main();
