import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import {
  type CliResult,
  ephemeralListenerEnv,
  get,
  post,
  runCli,
  type SpawnedPostern,
  spawnPostern,
  validMessage,
} from '../support/postern.js';

/** One scratch directory for this file: config files and state dirs live under it. */
const scratch = mkdtempSync(path.join(tmpdir(), 'postern-config-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

let counter = 0;
/** A path under the scratch dir that does not exist yet. */
function unusedPath(label: string): string {
  return path.join(scratch, `${label}-${++counter}`);
}

function writeConfig(content: unknown): string {
  const file = `${unusedPath('config')}.json`;
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

const listener = (name: string, environment: string, port: number) => ({
  name,
  protocol: 'http',
  environment,
  port,
});

/** `postern start --config FILE --json` must refuse the config: exit 78, one JSON error naming `key`, no state dir. */
async function rejectsConfig(
  args: string[],
  key: string | null,
  env: Record<string, string> = {},
): Promise<CliResult> {
  const stateDir = unusedPath('state');
  const r = await runCli([...args, '--json'], { POSTERN_STATE_DIR: stateDir, ...env });
  assert.equal(r.code, 78, `expected exit 78: ${r.stdout}${r.stderr}`);
  assert.ok(
    r.stdout.endsWith('\n') && !r.stdout.slice(0, -1).includes('\n'),
    `one line of JSON: ${r.stdout}`,
  );
  assert.deepEqual(r.json, {
    error: { code: 'config_invalid', message: r.json.error.message, key },
  });
  if (key !== null) assert.ok(r.json.error.message.includes(key), r.json.error.message);
  assert.equal(
    existsSync(stateDir),
    false,
    'the state directory must not be created for a bad config',
  );
  return r;
}

describe('postern start with a bad config', () => {
  test('an invalid listener environment names listeners.0.environment', async () => {
    const file = writeConfig({ listeners: [listener('x', 'staging', 1)] });
    await rejectsConfig(['start', '--config', file], 'listeners.0.environment');
  });

  test('an unknown top-level key is named', async () => {
    const file = writeConfig({ state_dirr: '/tmp/typo' });
    await rejectsConfig(['start', '--config', file], 'state_dirr');
  });

  test('port 70000 names listeners.0.port', async () => {
    const file = writeConfig({ listeners: [listener('web', 'production', 70000)] });
    await rejectsConfig(['start', '--config', file], 'listeners.0.port');
  });

  test('a listener without a port names listeners.1.port', async () => {
    const file = writeConfig({
      listeners: [
        listener('a', 'production', 0),
        { name: 'b', protocol: 'http', environment: 'sandbox' },
      ],
    });
    await rejectsConfig(['start', '--config', file], 'listeners.1.port');
  });

  test('an unknown key inside a listener and a bad log level are named', async () => {
    const a = writeConfig({ listeners: [{ ...listener('a', 'production', 0), tls: true }] });
    const b = writeConfig({ log: { level: 'loud' } });
    await Promise.all([
      rejectsConfig(['start', '--config', a], 'listeners.0.tls'),
      rejectsConfig(['start', '--config', b], 'log.level'),
    ]);
  });

  test('an empty listener list names listeners', async () => {
    const file = writeConfig({ listeners: [] });
    await rejectsConfig(['start', '--config', file], 'listeners');
  });

  test('two listeners with one name name listeners.1.name', async () => {
    const file = writeConfig({
      listeners: [listener('web', 'production', 0), listener('web', 'sandbox', 0)],
    });
    const r = await rejectsConfig(['start', '--config', file], 'listeners.1.name');
    assert.ok(r.json.error.message.includes('"web"'));
  });

  test('webhooks.nice must be "idle" or a nice value 0-19; saturated_cpu_share must be positive', async () => {
    await rejectsConfig(
      ['start', '--config', writeConfig({ webhooks: { nice: 'fast' } })],
      'webhooks.nice',
    );
    await rejectsConfig(
      ['start', '--config', writeConfig({ webhooks: { nice: 20 } })],
      'webhooks.nice',
    );
    await rejectsConfig(
      ['start', '--config', writeConfig({ webhooks: { saturated_cpu_share: 0 } })],
      'webhooks.saturated_cpu_share',
    );
  });

  test("trusted proxies are IP addresses or CIDRs, the bad entry named; proxy_protocol is an SMTP listener's and needs them", async () => {
    const smtp = (extra: Record<string, unknown>) => ({
      listeners: [{ name: 'smtp', protocol: 'smtp', environment: 'production', port: 0, ...extra }],
    });
    const prefix = await rejectsConfig(
      ['start', '--config', writeConfig({ http: { trusted_proxies: ['10.0.0.0/33'] } })],
      'http.trusted_proxies.0',
    );
    assert.match(
      prefix.json.error.message,
      /: http\.trusted_proxies\.0 "10\.0\.0\.0\/33" has an invalid prefix length$/,
    );
    const name = await rejectsConfig(
      [
        'start',
        '--config',
        writeConfig({ http: { trusted_proxies: ['127.0.0.1', 'lb.example.org'] } }),
      ],
      'http.trusted_proxies.1',
    );
    assert.match(name.json.error.message, /"lb\.example\.org" is not an IP address, a CIDR/);
    // ipaddr.js would read 0x7f000001 as 127.0.0.1; a config writes addresses plainly.
    await rejectsConfig(
      [
        'start',
        '--config',
        writeConfig(smtp({ proxy_protocol: true, trusted_proxies: ['10.0.0.1', '0x7f000001'] })),
      ],
      'listeners.0.trusted_proxies.1',
    );
    const none = await rejectsConfig(
      ['start', '--config', writeConfig(smtp({ proxy_protocol: true }))],
      'listeners.0.trusted_proxies',
    );
    assert.match(
      none.json.error.message,
      /must list the load balancer's addresses when proxy_protocol is true$/,
    );
    await rejectsConfig(
      ['start', '--config', writeConfig(smtp({ trusted_proxies: ['10.0.0.1'] }))],
      'listeners.0.trusted_proxies',
    );
    const http = await rejectsConfig(
      [
        'start',
        '--config',
        writeConfig({
          listeners: [
            {
              ...listener('web', 'production', 0),
              proxy_protocol: true,
              trusted_proxies: ['10.0.0.1'],
            },
          ],
        }),
      ],
      'listeners.0.proxy_protocol',
    );
    assert.match(
      http.json.error.message,
      /are for SMTP listeners \(HTTP and console listeners: http\.trusted_proxies\)$/,
    );
  });

  test('memory.heap_growth_percent must be an integer 0-400', async () => {
    await rejectsConfig(
      ['start', '--config', writeConfig({ memory: { heap_growth_percent: -1 } })],
      'memory.heap_growth_percent',
    );
    await rejectsConfig(
      ['start', '--config', writeConfig({ memory: { heap_growth_percent: 12.5 } })],
      'memory.heap_growth_percent',
    );
    await rejectsConfig(
      ['start', '--config', writeConfig({ memory: { heap_grow: 20 } })],
      'memory.heap_grow',
    );
  });

  test('console.max_streams must stay below console.max_connections (a sign-out needs a connection too)', async () => {
    const r = await rejectsConfig(
      ['start', '--config', writeConfig({ console: { max_streams: 128, max_connections: 128 } })],
      'console.max_streams',
    );
    assert.match(
      r.json.error.message,
      /console\.max_streams \(128\) must be below console\.max_connections \(128\)/,
    );
    await rejectsConfig(
      ['start', '--config', writeConfig({ console: { stream_max_queued_bytes: 1024 } })],
      'console.stream_max_queued_bytes',
    );
  });

  test('store.backend "postgres" needs a postgres:// URL, from the file or POSTERN_DATABASE_URL; the error never repeats it', async () => {
    await rejectsConfig(
      ['start', '--config', writeConfig({ store: { backend: 'postgres' } })],
      'store.postgres.url',
    );
    await rejectsConfig(
      ['start', '--config', writeConfig({ store: { backend: 'mysql' } })],
      'store.backend',
    );
    await rejectsConfig(
      [
        'start',
        '--config',
        writeConfig({ store: { backend: 'postgres', postgres: { pool_size: 1 } } }),
      ],
      'store.postgres.pool_size',
    );
    const notUrl = await rejectsConfig(
      ['start', '--config', writeConfig({ store: { backend: 'postgres' } })],
      'store.postgres.url',
      { POSTERN_DATABASE_URL: 'user:s3cret@db/postern' },
    );
    assert.doesNotMatch(notUrl.json.error.message, /s3cret/);
    const wrongScheme = await rejectsConfig(
      [
        'start',
        '--config',
        writeConfig({
          store: { backend: 'postgres', postgres: { url: 'mysql://user:s3cret@db/postern' } },
        }),
      ],
      'store.postgres.url',
    );
    assert.match(
      wrongScheme.json.error.message,
      /must start with postgres:\/\/ or postgresql:\/\/ \(got mysql:\/\/\)/,
    );
    assert.doesNotMatch(wrongScheme.json.error.message, /s3cret/);
  });

  test('a file that is not JSON is refused', async () => {
    const file = writeConfig('{"listeners": [ this is not json');
    const r = await rejectsConfig(['start', '--config', file], null);
    assert.ok(r.json.error.message.includes(file));
    assert.match(r.json.error.message, /not valid JSON/);
  });

  test('a missing file is refused', async () => {
    const file = `${unusedPath('missing')}.json`;
    const r = await rejectsConfig(['start', '--config', file], null);
    assert.ok(r.json.error.message.includes(file));
  });

  test('POSTERN_CONFIG is used when --config is absent', async () => {
    const file = writeConfig({ listeners: [listener('x', 'staging', 1)] });
    await rejectsConfig(['start'], 'listeners.0.environment', { POSTERN_CONFIG: file });
  });

  test('an operator command with a bad --config exits 78 too', async () => {
    const file = writeConfig({ retention_days: 0 });
    await rejectsConfig(['project', 'create', '--name', 'x', '--config', file], 'retention_days');
  });

  test('without --json the config error goes to stderr as text', async () => {
    const file = writeConfig({ listeners: [listener('x', 'staging', 1)] });
    const stateDir = unusedPath('state');
    const r = await runCli(['start', '--config', file], { POSTERN_STATE_DIR: stateDir });
    assert.equal(r.code, 78);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /listeners\.0\.environment/);
    assert.equal(existsSync(stateDir), false);
  });
});

describe('environment overrides', () => {
  test('POSTERN_LISTEN_<NAME> overrides the port of a listener in the config file', async () => {
    // Ports 1 and 2 in the file; the harness sets POSTERN_LISTEN_HTTP_PRODUCTION/SANDBOX=127.0.0.1:0.
    const file = writeConfig({
      listeners: [
        listener('http-production', 'production', 1),
        listener('http-sandbox', 'sandbox', 2),
      ],
    });
    const stateDir = unusedPath('state');
    const p = await spawnPostern(stateDir, {}, ['--config', file]);
    try {
      assert.equal(p.listeners.length, 2);
      for (const l of p.listeners) {
        assert.equal(l.host, '127.0.0.1');
        assert.ok(l.port > 2, `port ${l.port} should be the ephemeral one`);
      }
      assert.deepEqual((await get(p.production, '/healthz')).body, {
        status: 'ok',
        environment: 'production',
      });
    } finally {
      assert.equal(await p.stop(), 0);
    }
  });

  test('POSTERN_STATE_DIR overrides the config file’s state_dir', async () => {
    const fromFile = unusedPath('state-from-file');
    const fromEnv = unusedPath('state-from-env');
    const file = writeConfig({
      state_dir: fromFile,
      listeners: [
        listener('http-production', 'production', 0),
        listener('http-sandbox', 'sandbox', 0),
      ],
    });
    const p = await spawnPostern(fromEnv, {}, ['--config', file]);
    assert.equal(await p.stop(), 0);
    assert.equal(existsSync(path.join(fromEnv, 'postern.db')), true);
    assert.equal(existsSync(fromFile), false);
  });

  test('listeners not named in the environment keep their configured address', async () => {
    const stateDir = unusedPath('state');
    // Names no POSTERN_LISTEN_* variable matches: the ports in the file (0, ephemeral) are used.
    const file = writeConfig({
      listeners: [listener('web', 'production', 0), listener('web-test', 'sandbox', 0)],
    });
    const p = await spawnPostern(stateDir, {}, ['--config', file]);
    try {
      assert.deepEqual(
        p.listeners.map((l) => ({ ...l, port: 0, url: l.url.replace(/:\d+$/, '') })),
        [
          {
            name: 'web',
            protocol: 'http',
            environment: 'production',
            host: '127.0.0.1',
            port: 0,
            url: 'http://127.0.0.1',
          },
          {
            name: 'web-test',
            protocol: 'http',
            environment: 'sandbox',
            host: '127.0.0.1',
            port: 0,
            url: 'http://127.0.0.1',
          },
        ],
      );
      for (const l of p.listeners) assert.equal(l.url, `http://127.0.0.1:${l.port}`);
      assert.deepEqual((await get(p.sandbox, '/healthz')).body, {
        status: 'ok',
        environment: 'sandbox',
      });
    } finally {
      assert.equal(await p.stop(), 0);
    }
  });

  test('an invalid POSTERN_LISTEN_* value fails with an error naming the variable', async () => {
    const results = await Promise.all(
      ['nonsense', '127.0.0.1:99999', '127.0.0.1:'].map((value) =>
        rejectsConfig(['start'], 'POSTERN_LISTEN_HTTP_PRODUCTION', {
          ...ephemeralListenerEnv(),
          POSTERN_LISTEN_HTTP_PRODUCTION: value,
        }),
      ),
    );
    assert.match(results[0].json.error.message, /host:port/);
    assert.ok(results[0].json.error.message.includes('nonsense'));
  });
});

describe('postern start', () => {
  test('serves GET /healthz on both listeners and exits 0 on SIGTERM', async () => {
    const stateDir = unusedPath('state');
    const p = await spawnPostern(stateDir);
    let exit: number | null = -1;
    try {
      assert.notEqual(p.production, p.sandbox);
      const [prod, sand] = await Promise.all([
        get(p.production, '/healthz'),
        get(p.sandbox, '/healthz'),
      ]);
      assert.equal(prod.status, 200);
      assert.deepEqual(prod.body, { status: 'ok', environment: 'production' });
      assert.equal(sand.status, 200);
      assert.deepEqual(sand.body, { status: 'ok', environment: 'sandbox' });
    } finally {
      exit = await p.stop();
    }
    assert.equal(exit, 0);
    assert.equal(p.child.exitCode, 0);
  });
  test('SIGINT stops it with exit 0 too', async () => {
    const p = await spawnPostern(unusedPath('state'));
    assert.equal((await get(p.production, '/healthz')).status, 200);
    const exited = new Promise<number | null>((resolve) =>
      p.child.once('exit', (code) => resolve(code)),
    );
    p.child.kill('SIGINT');
    assert.equal(await exited, 0);
  });

  test('a listener address already in use makes it exit non-zero with a JSON error', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as AddressInfo).port;
    try {
      const r = await runCli(['start', '--json'], {
        POSTERN_STATE_DIR: unusedPath('state'),
        ...ephemeralListenerEnv(),
        POSTERN_LISTEN_HTTP_PRODUCTION: `127.0.0.1:${port}`,
      });
      assert.notEqual(r.code, 0);
      assert.deepEqual(r.json, {
        error: { code: r.json.error.code, message: r.json.error.message },
      });
      assert.ok(r.json.error.message.includes(`127.0.0.1:${port}`), r.json.error.message);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });
});

describe('logs', () => {
  let p: SpawnedPostern | undefined;
  after(async () => {
    if (p && p.child.exitCode === null && p.child.signalCode === null) await p.kill();
  });

  test('are JSON lines on stderr and never contain keys, subjects or bodies', async () => {
    const stateDir = unusedPath('state');
    const env = { POSTERN_STATE_DIR: stateDir };
    const project = await runCli(['project', 'create', '--name', 'logs', '--json'], env);
    assert.equal(project.code, 0, project.stdout + project.stderr);
    assert.equal(
      (
        await runCli(
          [
            'provider',
            'attach',
            '--project',
            project.json.id,
            '--slug',
            'smtp',
            '--host',
            'smtp.example.net',
            '--json',
          ],
          env,
        )
      ).code,
      0,
    );
    const key = await runCli(
      ['key', 'create', '--project', project.json.id, '--mode', 'live', '--json'],
      env,
    );
    assert.equal(key.code, 0, key.stdout + key.stderr);
    const liveKey: string = key.json.key;

    const subjectMarker = 'SubjectMarkerQ7w3Zr';
    const textMarker = 'TextMarkerK2p9Lx';
    const htmlMarker = 'HtmlMarkerV5n1Bd';
    const badSubjectMarker = 'RejectedSubjectMarkerT4m8';
    const unknownKey = `ps_live_${'U'.repeat(36)}nkwn`;

    p = await spawnPostern(stateDir, { POSTERN_LOG_LEVEL: 'debug' });
    const accepted = await post(p.production, '/v1/send', {
      key: liveKey,
      json: validMessage({
        subject: `Hello ${subjectMarker}`,
        text: `Body ${textMarker}`,
        html: `<p>${htmlMarker}</p>`,
      }),
    });
    assert.equal(accepted.status, 202, accepted.text);
    const invalid = await post(p.production, '/v1/send', {
      key: liveKey,
      json: validMessage({ from: 'not an address', subject: badSubjectMarker }),
    });
    assert.equal(invalid.status, 422);
    const unauthorized = await post(p.production, '/v1/send', {
      key: unknownKey,
      json: validMessage(),
    });
    assert.equal(unauthorized.status, 401);
    assert.equal(await p.stop(), 0);

    const stderr = p.stderr();
    const lines = stderr.split('\n').filter((l) => l !== '');
    assert.ok(lines.length > 0, 'debug logging should produce log lines');
    const records = lines.map((line) => {
      const record: unknown = JSON.parse(line);
      assert.equal(typeof record, 'object', line);
      return record as Record<string, unknown>;
    });
    // Debug level was really on: the accepted message was logged, by id only.
    const acceptedLog = records.find((r) => r.msg === 'message accepted');
    assert.ok(acceptedLog, stderr);
    assert.equal(acceptedLog.level, 'debug');
    assert.equal(acceptedLog.message_id, accepted.body.id);
    assert.ok(
      records.some((r) => r.msg === 'request'),
      'requests are logged',
    );

    for (const secret of [
      liveKey,
      liveKey.slice(8),
      unknownKey,
      subjectMarker,
      textMarker,
      htmlMarker,
      badSubjectMarker,
    ]) {
      assert.equal(stderr.includes(secret), false, `logs contain ${secret}`);
    }
  });
});
