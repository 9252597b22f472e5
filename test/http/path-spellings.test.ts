/**
 * Secrets in URL paths under other spellings (issue 32, item 4). A provider feedback
 * endpoint's secret (`/v1/feedback/<account>/<secret>`) and a viewer link's token
 * (`/view/<id>/<token>`) are sent to a real server, at log level trace, in every spelling a
 * lenient router or proxy might take for them: case, `//`, `/./`, `/../`, `%2F` and `%2f`,
 * encoded dots and letters, a trailing slash, backslashes, double encoding, a fragment, the
 * absolute form, a prefix; on the send API's listeners and on the console's. Only the canonical
 * spelling is served; every other answers 404, and no log line of any level holds the secret.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createOperator, createOperatorToken } from '../../src/operator/operators.js';
import { attachProvider } from '../../src/operator/providers.js';
import { jsonLogLines } from '../support/logLines.js';
import {
  createProjectWithKeys,
  post,
  runCli,
  type SpawnedPostern,
  validMessage,
} from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';

const SECRET = 'pmSecret-7c1f0e9a44d2-Kq';
const OPEN = JSON.stringify({
  RecordType: 'Open',
  MessageID: 'x',
  Recipient: 'ann@example.org',
  ReceivedAt: '2026-03-02T10:00:05Z',
});

/** Every character percent-encoded (`%70%6D…`): a spelling some decoders accept. */
const encodedWhole = (text: string) =>
  [...Buffer.from(text)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');

interface Spelling {
  name: string;
  listener: 'production' | 'console';
  method: 'GET' | 'POST';
  target: string;
  /** The secret as this request carries it: no log line may hold it (compared ignoring case). */
  secret: string;
  status: number;
  /** Refused by Node's HTTP parser (400) before any of Postern's code: no request line. */
  unparsed?: true;
  headers?: Record<string, string>;
}

/** The feedback endpoint's spellings: only the canonical ones are served (200). */
function feedbackSpellings(account: string): Spelling[] {
  const s = SECRET;
  const at = (name: string, target: string, status = 404, secret = s): Spelling => ({
    name: `feedback, ${name}`,
    listener: 'production',
    method: 'POST',
    target,
    secret,
    status,
  });
  return [
    at('canonical', `/v1/feedback/${account}/${s}`, 200),
    at('canonical with a query', `/v1/feedback/${account}/${s}?source=postmark`, 200),
    at('the secret in the query only', `/v1/feedback/${account}?token=${s}`, 401),
    at('upper-case version', `/V1/feedback/${account}/${s}`),
    at('upper-case route', `/v1/FEEDBACK/${account}/${s}`),
    at('leading //', `//v1/feedback/${account}/${s}`),
    at('// inside', `/v1//feedback/${account}/${s}`),
    at('// before the account', `/v1/feedback//${account}/${s}`),
    at('// before the secret', `/v1/feedback/${account}//${s}`),
    at('/./ inside', `/v1/./feedback/${account}/${s}`),
    at('/./ before the secret', `/v1/feedback/${account}/./${s}`),
    at('/../ inside', `/v1/x/../feedback/${account}/${s}`),
    at('/.. after the secret', `/v1/feedback/${account}/${s}/..`),
    at('%2F before the secret', `/v1/feedback/${account}%2F${s}`),
    at('%2f before the secret', `/v1/feedback/${account}%2f${s}`),
    { ...at('%2F for every slash', `%2Fv1%2Ffeedback%2F${account}%2F${s}`, 400), unparsed: true },
    at('%2F for every slash but the first', `/v1%2Ffeedback%2F${account}%2F${s}`),
    at('%2f after the version', `/v1%2ffeedback/${account}/${s}`),
    at('%252F (double encoding) before the secret', `/v1/feedback/${account}%252F${s}`),
    at('%2e segment', `/v1/feedback/${account}/%2e/${s}`),
    at('%2E%2E segment', `/v1/%2E%2E/v1/feedback/${account}/${s}`),
    at('.%2e segment after the secret', `/v1/feedback/${account}/${s}/.%2e`),
    at('an encoded letter in the route', `/v1/f%65edback/${account}/${s}`),
    at(
      'the secret percent-encoded whole',
      `/v1/feedback/${account}/${encodedWhole(s)}`,
      404,
      encodedWhole(s),
    ),
    // `%2553` is `%53` decoded once (the path's own spelling), never `S`: a wrong secret.
    at(
      'a letter of the secret encoded twice',
      `/v1/feedback/${account}/${s.replace('S', '%2553')}`,
      401,
      s.replace('S', '%2553'),
    ),
    at('trailing slash', `/v1/feedback/${account}/${s}/`),
    at('backslashes', `/v1\\feedback\\${account}\\${s}`),
    at('%5C before the secret', `/v1/feedback/${account}%5C${s}`),
    at('a ;parameter', `/v1/feedback;v=1/${account}/${s}`),
    at('a fragment', `/v1/feedback/${account}#/${s}`),
    at('a malformed escape after the secret', `/v1/feedback/${account}/${s}%zz`),
    at('the absolute form', `http://127.0.0.1/v1/feedback/${account}/${s}`),
    at('under a prefix', `/api/v1/feedback/${account}/${s}`),
    { ...at('GET', `/v1/feedback/${account}/${s}`), method: 'GET' },
    { ...at('on the console listener', `/v1/feedback/${account}/${s}`), listener: 'console' },
    {
      ...at('upper-case, on the console listener', `/V1/Feedback/${account}/${s}`),
      listener: 'console',
    },
    {
      ...at('%2F, on the console listener', `/v1/feedback/${account}%2F${s}`),
      listener: 'console',
    },
  ];
}

/** The viewer link's spellings: only the canonical ones are served (200). */
function viewerSpellings(id: string, token: string): Spelling[] {
  const at = (name: string, target: string, status = 404): Spelling => ({
    name: `viewer, ${name}`,
    listener: 'production',
    method: 'GET',
    target,
    secret: token,
    status,
  });
  return [
    at('canonical', `/view/${id}/${token}`, 200),
    at('canonical body', `/view/${id}/${token}/body`, 200),
    at('canonical with a query', `/view/${id}/${token}?images=1`, 200),
    at('/VIEW/', `/VIEW/${id}/${token}`),
    at('/View/ and /BODY', `/View/${id}/${token}/BODY`),
    at('leading //', `//view/${id}/${token}`),
    at('// before the token', `/view/${id}//${token}`),
    at('/./ before the id', `/view/./${id}/${token}`),
    at('%2F before the token', `/view/${id}%2F${token}`),
    at('%2f before the token', `/view/${id}%2f${token}`),
    at('%2e segment', `/view/${id}/%2e/${token}`),
    at('an encoded letter in the route', `/vi%65w/${id}/${token}`),
    at('trailing slash', `/view/${id}/${token}/`),
    at('backslash', `/view\\${id}\\${token}`),
    { ...at('on the console listener', `/view/${id}/${token}`), listener: 'console' },
    { ...at('/VIEW/, on the console listener', `/VIEW/${id}/${token}`), listener: 'console' },
  ];
}

/** The console API's spellings, with an operator's API token: the id is decoded once, the path matched exactly. */
function consoleSpellings(id: string, token: string): Spelling[] {
  const at = (name: string, target: string, status = 404): Spelling => ({
    name: `console API, ${name}`,
    listener: 'console',
    method: 'GET',
    target,
    secret: token,
    status,
    headers: { authorization: `Bearer ${token}` },
  });
  const twice = id.replace(/.$/, (c) => `%25${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return [
    at('canonical', `/console/api/v1/messages/${id}`, 200),
    at('the id with a character encoded twice', `/console/api/v1/messages/${twice}`),
    at('upper-case API', `/console/API/v1/messages/${id}`),
    at('trailing slash', `/console/api/v1/messages/${id}/`),
    at('// inside', `/console/api//v1/messages/${id}`),
  ];
}

/** One request with exactly this target (no client-side normalisation), on a connection of its own. */
function send(base: string, spelling: Spelling): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: spelling.method,
        path: spelling.target,
        agent: false,
        headers: {
          ...(spelling.method === 'POST' ? { 'content-type': 'application/json' } : {}),
          ...spelling.headers,
        },
      },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode!));
      },
    );
    req.once('error', reject);
    req.end(spelling.method === 'POST' ? OPEN : undefined);
  });
}

describe('secrets in URL paths, in every spelling, on every listener (a real server at log level trace)', () => {
  const processes = new ProcessScope();
  let server: SpawnedPostern;
  let logFile: string;
  let spellings: Spelling[];
  const statuses = new Map<string, number>();

  before(async () => {
    const stateDir = processes.stateDir('postern-spellings-');
    const { liveKey, accountId, operatorToken } = await withClosedIndex(stateDir, async (ctx) => {
      const pk = await createProjectWithKeys(ctx, 'spellings');
      const account = await attachProvider(ctx, pk.project.id, {
        slug: 'provider-e-api',
        apiKey: 'server-token',
        endpoint: 'http://127.0.0.1:9',
        webhookSecret: SECRET,
      });
      const operator = await createOperator(ctx, {
        email: 'owner@example.com',
        role: 'owner',
        password: 'correct horse battery staple',
      });
      const { token } = await createOperatorToken(ctx, operator.id, 'spellings');
      return { liveKey: pk.liveKey, accountId: account.id, operatorToken: token };
    });
    const configFile = path.join(stateDir, 'config.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        delivery: { enabled: false },
        rate_limits: {
          send_per_key: 100_000,
          unauthenticated_per_ip: 100_000,
          viewer_per_ip: 100_000,
        },
      }),
    );
    logFile = path.join(stateDir, 'postern.log');
    server = await processes.spawn(
      stateDir,
      { POSTERN_CONFIG: configFile, POSTERN_LOG_LEVEL: 'trace' },
      [],
      { logFile },
    );
    const sent = await post(server.production, '/v1/send', { key: liveKey, json: validMessage() });
    assert.equal(sent.status, 202, sent.text);
    const link = await runCli(['message', 'link', sent.body.id, '--json'], {
      POSTERN_STATE_DIR: stateDir,
      POSTERN_CONFIG: configFile,
    });
    assert.equal(link.code, 0, link.stderr);
    const [, id, token] = /\/view\/([^/]+)\/([^/?]+)$/.exec(link.json.url)!;
    spellings = [
      ...feedbackSpellings(accountId),
      ...viewerSpellings(id, token),
      ...consoleSpellings(sent.body.id, operatorToken),
    ];
    const consoleUrl = server.listeners.find((l) => l.protocol === 'console')!.url;
    for (const spelling of spellings)
      statuses.set(
        spelling.name,
        await send(spelling.listener === 'console' ? consoleUrl : server.production, spelling),
      );
    await server.stop();
  });
  after(async () => processes.cleanup());

  test('only the canonical spelling is served; every other is 404, on every listener', () => {
    const wrong = spellings
      .filter((s) => statuses.get(s.name) !== s.status)
      .map((s) => `${s.name} (${s.target}): ${statuses.get(s.name)}, not ${s.status}`);
    assert.deepEqual(wrong, []);
  });

  test('no log line holds the secret, whatever the spelling and the answer', () => {
    const text = readFileSync(logFile, 'utf8');
    // Each request's lines (its warnings, its request line) come before the next request's: the
    // requests were sent one after the other, and Node's parser logs nothing for those it refuses.
    const lines = text.split('\n');
    const ends = lines.flatMap((line, i) =>
      /"msg":"(console )?request/.test(line) && !line.includes('"path":"/v1/send"') ? [i] : [],
    );
    const logged = spellings.filter((s) => !s.unparsed);
    assert.equal(ends.length, logged.length);
    const leaks = logged
      .filter((s, k) =>
        lines
          .slice(k === 0 ? 0 : ends[k - 1] + 1, ends[k] + 1)
          .some((line) => line.toLowerCase().includes(s.secret.toLowerCase())),
      )
      .map((s) => `${s.name}: ${s.target}`);
    assert.deepEqual(leaks, []);
    // And on no line at all (start, stop, anything between).
    for (const s of spellings)
      assert.ok(!text.toLowerCase().includes(s.secret.toLowerCase()), `the log holds ${s.secret}`);
  });

  test('every request has its request line, its path masked: `***` where the secret was', () => {
    const lines = jsonLogLines<{ msg: string; path?: string; method?: string }>(
      readFileSync(logFile, 'utf8'),
    ).filter((l) => l.msg === 'request' || l.msg === 'console request');
    const requestLines = lines.filter((l) => l.path !== '/v1/send');
    assert.equal(
      requestLines.length,
      spellings.filter((s) => !s.unparsed).length,
      JSON.stringify(requestLines.map((l) => l.path)),
    );
    for (const line of requestLines)
      assert.match(line.path!, /\*\*\*|^\/v1\/feedback\/[^/]+$|^\/console\//, line.path);
  });
});

describe('an error that carries a URL is logged with its secrets masked (the logger of a real process)', () => {
  test("in every field: a URL error's input, a message, a cause, a field of its own", async () => {
    const logModule = new URL('../../src/log.js', import.meta.url).href;
    const script = `
      import { createLogger } from ${JSON.stringify(logModule)};
      const log = createLogger('info');
      let invalid;
      try { new URL('http://[/V1/feedback/pa.x/${SECRET}'); } catch (err) { invalid = err; }
      log.error({ err: invalid }, 'an invalid URL');
      log.error({ err: new Error('fetch failed', { cause: new Error('POST //v1/feedback/pa.x/${SECRET} refused') }) }, 'a cause');
      const own = Object.assign(new Error('no such link'), { url: '/VIEW/m.x/tok3n-${SECRET}', request: { path: '/v1/feedback/pa.x%2F${SECRET}' } });
      log.error({ err: own }, 'fields of its own');
      log.flush();
    `;
    const { spawn } = await import('node:child_process');
    const stderr = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let out = '';
      child.stderr.on('data', (d) => (out += d));
      child.on('error', reject);
      child.on('close', () => resolve(out));
    });
    const lines = jsonLogLines<{
      msg: string;
      err: { message: string; input?: string; url?: string };
    }>(stderr);
    assert.deepEqual(
      lines.map((l) => l.msg),
      ['an invalid URL', 'a cause', 'fields of its own'],
    );
    assert.equal(lines[0].err.input, 'http://[/V1/feedback/pa.x/***');
    assert.equal(lines[2].err.url, '/VIEW/m.x/***');
    assert.ok(!stderr.includes(SECRET), stderr);
  });
});
