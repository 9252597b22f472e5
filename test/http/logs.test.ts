/**
 * What the HTTP door writes to the log (issue 17), read from a real server's stderr: the URL
 * secret of a provider feedback endpoint and a public viewer link's token are masked in the
 * request line, no key or credential
 * reaches any line, and a client that goes away mid-body is an info line, not an error.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { OperatorContext } from '../../src/operator/context.js';
import { attachProvider } from '../../src/operator/providers.js';
import { allValues } from '../../src/store/queries.js';
import { jsonLogLines } from '../support/logLines.js';
import {
  createProjectWithKeys,
  post,
  type SpawnedPostern,
  validMessage,
} from '../support/postern.js';
import { ProcessScope, withClosedIndex } from '../support/processes.js';
import { postFeedback } from '../support/providerEmulator.js';

const WEBHOOK_SECRET = 'pm-secret-7c1f0e9a44d2';
const WRONG_SECRET = 'guessed-secret-0b8e6d2f';

interface LogLine {
  level: string;
  msg: string;
  path?: string;
  status?: number | null;
  aborted?: boolean;
  [key: string]: unknown;
}

/** A real server at log level info, its stderr in a file, set up by `seed` before it starts. */
async function loggingServer<T>(
  processes: ProcessScope,
  seed: (ctx: OperatorContext) => T | Promise<T>,
): Promise<{ server: SpawnedPostern; logFile: string; stateDir: string; seeded: T }> {
  const stateDir = processes.stateDir('postern-logs-');
  const seeded = await withClosedIndex(stateDir, seed);
  const configFile = path.join(stateDir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ delivery: { enabled: false } }));
  const logFile = path.join(stateDir, 'postern.log');
  const server = await processes.spawn(
    stateDir,
    { POSTERN_CONFIG: configFile, POSTERN_LOG_LEVEL: 'info' },
    [],
    { logFile },
  );
  return { server, logFile, stateDir, seeded };
}

/** Every line of the log (after the server stopped: lines are buffered). */
const logLines = (logFile: string): LogLine[] =>
  jsonLogLines<LogLine>(readFileSync(logFile, 'utf8'));

describe('the request log (a real server at log level info)', () => {
  const processes = new ProcessScope();
  let server: SpawnedPostern;
  let logFile: string;
  let liveKey: string;
  let accountId: string;

  before(async () => {
    ({
      server,
      logFile,
      seeded: { liveKey, accountId },
    } = await loggingServer(processes, async (ctx) => {
      const pk = await createProjectWithKeys(ctx, 'logs');
      const account = await attachProvider(ctx, pk.project.id, {
        slug: 'provider-e-api',
        apiKey: 'server-token',
        endpoint: 'http://127.0.0.1:9',
        webhookSecret: WEBHOOK_SECRET,
      });
      return { liveKey: pk.liveKey, accountId: account.id };
    }));
  });
  after(async () => processes.cleanup());

  test('a feedback URL secret is logged as ***, whether it was right or wrong, and appears on no line', async () => {
    const open = JSON.stringify({
      RecordType: 'Open',
      MessageID: 'x',
      Recipient: 'ann@example.org',
      ReceivedAt: '2026-03-02T10:00:05Z',
    });
    assert.equal(
      (await postFeedback(server.production, accountId, open, {}, WEBHOOK_SECRET)).status,
      200,
    );
    assert.equal(
      (await postFeedback(server.production, accountId, open, {}, WRONG_SECRET)).status,
      401,
    );
    assert.equal(
      (
        await postFeedback(server.production, accountId, open, {
          authorization: `Basic ${Buffer.from(`postmark:${WRONG_SECRET}`).toString('base64')}`,
        })
      ).status,
      401,
    );
    await server.stop();
    const feedbackLines = logLines(logFile).filter(
      (l) => l.msg === 'request' && l.path?.startsWith('/v1/feedback/'),
    );
    assert.deepEqual(
      feedbackLines.map((l) => [l.path, l.status]),
      [
        [`/v1/feedback/${accountId}/***`, 200],
        [`/v1/feedback/${accountId}/***`, 401],
        [`/v1/feedback/${accountId}`, 401],
      ],
    );
    const text = readFileSync(logFile, 'utf8');
    for (const secret of [WEBHOOK_SECRET, WRONG_SECRET, liveKey])
      assert.ok(!text.includes(secret), `the log holds ${secret}`);
  });
});

describe('a public viewer link in the request log (a real server at log level info)', () => {
  const processes = new ProcessScope();
  after(async () => processes.cleanup());

  test('its token is logged as ***, for the page and its body, and appears on no line', async () => {
    const { server, logFile } = await loggingServer(processes, () => null);
    const token = `tok3n.${'S'.repeat(43)}`;
    for (const suffix of ['', '/body']) {
      const res = await fetch(`${server.production}/view/m.01abc/${token}${suffix}`);
      assert.equal(res.status, 404);
      await res.text();
    }
    await server.stop();
    const viewerLines = logLines(logFile).filter(
      (l) => l.msg === 'request' && l.path?.startsWith('/view/'),
    );
    assert.deepEqual(
      viewerLines.map((l) => [l.path, l.status]),
      [
        ['/view/m.01abc/***', 404],
        ['/view/m.01abc/***/body', 404],
      ],
    );
    assert.ok(!readFileSync(logFile, 'utf8').includes('SSSSSSSS'), 'the log holds the token');
  });
});

describe('a client that goes away mid-body (a real server at log level info)', () => {
  const processes = new ProcessScope();
  let server: SpawnedPostern;
  let logFile: string;
  let stateDir: string;
  let liveKey: string;

  before(async () => {
    ({
      server,
      logFile,
      stateDir,
      seeded: liveKey,
    } = await loggingServer(
      processes,
      async (ctx) => (await createProjectWithKeys(ctx, 'abort')).liveKey,
    ));
  });
  after(async () => processes.cleanup());

  test('is one info line ("request aborted by the client"), no error; nothing is stored and the server keeps serving', async () => {
    const url = new URL(server.production);
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /v1/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${liveKey}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"from":"a@example.com",`,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.destroy();
    const sent = await post(server.production, '/v1/send', { key: liveKey, json: validMessage() });
    assert.equal(sent.status, 202, sent.text);
    await server.stop();
    const all = logLines(logFile);
    assert.deepEqual(
      all.filter((l) => l.level === 'error' || l.level === 'fatal'),
      [],
    );
    const aborted = all.filter((l) => l.aborted === true);
    assert.equal(aborted.length, 1);
    assert.deepEqual(
      [aborted[0].level, aborted[0].msg, aborted[0].path, aborted[0].status],
      ['info', 'request aborted by the client', '/v1/send', null],
    );
    assert.deepEqual(
      await withClosedIndex(stateDir, (ctx) =>
        allValues<string>(ctx.store, 'SELECT id FROM messages'),
      ),
      [sent.body.id],
    );
  });
});
