import assert from 'node:assert/strict';
import { spawn as spawnChild } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Queries } from '../../src/store/queries.js';
import { readMessageRows, spoolSnapshot } from '../support/assertions.js';
import {
  cliPath,
  createProjectWithKeys,
  ephemeralListenerEnv,
  get,
  type ProjectWithKeys,
  post,
  type SpawnedPostern,
  startTestPostern,
  validMessage,
} from '../support/postern.js';
import { databaseFor, sqliteOnly, testStore } from '../support/postgres.js';
import { ProcessScope, sleep, withClosedIndex } from '../support/processes.js';
import { readStoredMime, storedMimeOf } from '../support/storedMime.js';
import {
  acceptedEventIdsIn,
  assertStoreConsistent,
  messageRowsIn,
  withStateStore,
} from '../support/storeReads.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

// ---------------------------------------------------------------------------------------------
// Local helpers
// ---------------------------------------------------------------------------------------------

const ID_RE = /^m\.[0-9a-z]{26}$/;

const scope = new ProcessScope();
after(() => scope.cleanup());

const newStateDir = () => scope.stateDir('postern-crash-');

/** Creates a project with keys in a state dir through the operator functions, then closes the index. */
const seedProject = (stateDir: string): Promise<ProjectWithKeys> =>
  withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'crash project'));

const spawn = (stateDir: string, env: Record<string, string> = {}): Promise<SpawnedPostern> =>
  scope.spawn(stateDir, env);

/**
 * SIGTERM after one /healthz round trip: the answer proves the process is past its start-up
 * code, so the graceful stop is tested rather than the start-up signal race (which has its own
 * test below).
 */
async function stopWhenServing(server: SpawnedPostern): Promise<number | null> {
  const health = await get(server.production, '/healthz');
  assert.deepEqual(
    { status: health.status, body: health.body },
    { status: 200, body: { status: 'ok', environment: 'production' } },
  );
  return server.stop();
}

interface SendResult {
  status: number;
  body: any;
}

/** One POST /v1/send over a keep-alive agent; rejects on any transport error. */
function sendOnce(
  agent: Agent,
  baseUrl: string,
  key: string,
  message: Record<string, unknown>,
): Promise<SendResult> {
  const url = new URL('/v1/send', baseUrl);
  const payload = Buffer.from(JSON.stringify(message));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': payload.length,
          authorization: `Bearer ${key}`,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('aborted', () => reject(new Error('response aborted')));
        res.on('end', () => {
          if (!res.complete) {
            reject(new Error('response incomplete'));
            return;
          }
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = text;
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(payload);
  });
}

// A 48 KiB attachment on some messages makes the file writes long enough to be cut in half.
const ATTACHMENT = Buffer.alloc(48 * 1024, 'postern-crash-').toString('base64');

function loadMessage(loop: number, i: number): Record<string, unknown> {
  const base = validMessage({
    subject: `crash loop ${loop} message ${i}`,
    text: `body ${loop}/${i}`,
  });
  if (i % 4 === 3)
    base.attachments = [
      {
        filename: `blob-${loop}-${i}.bin`,
        content: ATTACHMENT,
        content_type: 'application/octet-stream',
      },
    ];
  return base;
}

interface LoadRun {
  /** Every id that came back in a complete 202 response. */
  acked: string[];
  /** Non-202 HTTP answers (a correct server gives none to valid messages). */
  unexpected: { status: number; body: unknown }[];
  /** Transport errors (connection refused/reset): unacknowledged by definition. */
  transportErrors: number;
  /** Why each loop ended. */
  endings: Record<'stopped' | 'server_gone' | 'budget', number>;
  /** Stops the loops from starting new requests. */
  stop(): void;
  /** Resolves once every loop has ended (each in-flight request settled). */
  done: Promise<void>;
}

/**
 * `clients` concurrent loops, each POSTing valid messages one after another. A loop ends when
 * stopped, when its budget (`maxPerLoop` requests or `maxMs`) is spent, or on a transport error
 * once `stopOnError()` says the server is gone; other transport errors are counted and retried.
 */
function startLoad(
  baseUrl: string,
  key: string,
  clients: number,
  opts: { maxPerLoop: number; maxMs: number; stopOnError?: () => boolean },
): LoadRun {
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const run: Omit<LoadRun, 'done'> & { done?: Promise<void> } = {
    acked: [],
    unexpected: [],
    transportErrors: 0,
    endings: { stopped: 0, server_gone: 0, budget: 0 },
    stop: () => {
      stopped = true;
    },
  };
  let stopped = false;
  const deadline = Date.now() + opts.maxMs;
  const loop = async (n: number) => {
    for (let i = 0; ; i++) {
      if (stopped) return void run.endings.stopped++;
      if (i >= opts.maxPerLoop || Date.now() >= deadline) return void run.endings.budget++;
      try {
        const res = await sendOnce(agent, baseUrl, key, loadMessage(n, i));
        if (
          res.status === 202 &&
          typeof res.body === 'object' &&
          res.body !== null &&
          ID_RE.test(res.body.id)
        )
          run.acked.push(res.body.id);
        else run.unexpected.push({ status: res.status, body: res.body });
      } catch {
        run.transportErrors++;
        if (opts.stopOnError?.()) return void run.endings.server_gone++;
        if (stopped) return void run.endings.stopped++;
        await sleep(5);
      }
    }
  };
  run.done = Promise.all(Array.from({ length: clients }, (_, n) => loop(n))).then(() =>
    agent.destroy(),
  );
  return run as LoadRun;
}

/**
 * Waits (polling, not a fixed sleep) for at least `minMs` and `minAcked` 202s, or, past
 * `enoughMs`, for any 202 at all: a busy machine makes fewer, but the load has always run.
 */
async function waitForLoad(
  run: LoadRun,
  minAcked: number,
  minMs: number,
  enoughMs: number,
): Promise<void> {
  const start = Date.now();
  for (;;) {
    const elapsed = Date.now() - start;
    if (
      elapsed >= minMs &&
      (run.acked.length >= minAcked || (elapsed >= enoughMs && run.acked.length > 0))
    )
      return;
    if (elapsed >= HANG_GUARD_MS)
      throw new Error(`no send acknowledged within ${HANG_GUARD_MS} ms`);
    await sleep(10);
  }
}

interface Row {
  id: string;
  status: string;
  spool_path: string;
  size_bytes: number;
  last_error: string | null;
}

/** Every message row of a (stopped or running) server's store, by id, on the backend the suites run against. */
const storedRows = (stateDir: string): Promise<Map<string, Row>> =>
  withStateStore(stateDir, (q) => messageRowsIn<Row>(q));

/**
 * The durability promise, checked on a stopped server's state dir: every acknowledged id is a
 * queued row with its MIME (a file, or for a small message its body in the index; on PostgreSQL
 * its body's chunks in the database); no file without a row; no temp file; no row without its MIME.
 */
async function assertSpoolIntact(stateDir: string, acked: string[]): Promise<void> {
  await withStateStore(stateDir, (q) => assertStoreIntact(q, stateDir, acked));
}

async function assertStoreIntact(q: Queries, stateDir: string, acked: string[]): Promise<void> {
  const rows = await messageRowsIn<Row>(q);
  const events = await acceptedEventIdsIn(q);

  const missingRows = acked.filter((id) => !rows.has(id));
  assert.deepEqual(missingRows, [], 'every acknowledged id has a messages row');

  const problems: string[] = [];
  for (const id of acked) {
    const row = rows.get(id)!;
    if (row.status !== 'queued')
      problems.push(`${id}: status ${row.status} (last_error ${row.last_error})`);
    if (row.last_error !== null) problems.push(`${id}: last_error ${row.last_error}`);
    if (!events.has(id)) problems.push(`${id}: no mail.accepted event`);
    const data = await storedMimeOf(q, stateDir, id).catch((err: Error) => err.message);
    if (typeof data === 'string') {
      problems.push(`${id}: ${data}`);
      continue;
    }
    if (data.length === 0) problems.push(`${id}: stored MIME is empty`);
    if (data.length !== row.size_bytes)
      problems.push(`${id}: stored MIME is ${data.length} bytes, row says ${row.size_bytes}`);
    if (!data.toString('latin1').includes(`Message-ID: <${id}@`))
      problems.push(`${id}: stored MIME lacks its Message-ID header`);
  }
  assert.deepEqual(
    problems,
    [],
    'every acknowledged message is queued with its complete MIME (file or body in the index)',
  );

  await assertStoreConsistent(q, stateDir, rows);
}

// ---------------------------------------------------------------------------------------------
// 1. Crash under load
// ---------------------------------------------------------------------------------------------

describe('SIGKILL under load', () => {
  test('every acknowledged message survives three kill -9 cycles with its row and MIME file; reconciliation leaves no orphan or temp file', async (t) => {
    const stateDir = newStateDir();
    const { liveKey } = await seedProject(stateDir);
    const allAcked: string[] = [];
    const perCycle: number[] = [];

    for (let cycle = 1; cycle <= 3; cycle++) {
      const server = await spawn(stateDir);
      const load = startLoad(server.production, liveKey, 50, {
        maxPerLoop: 400,
        maxMs: HANG_GUARD_MS,
      });
      // A disk stall (tests run two at a time) or a busy machine can hold the first commits for
      // seconds: the kill comes once 300 are acknowledged, or once any is after 5 s; never before
      // the first (the hang guard only keeps a broken server from hanging the test).
      await waitForLoad(load, 300, 400, 5_000);
      const killed = server.kill(); // SIGKILL is sent synchronously; the loops are mid-flight
      load.stop();
      await killed;
      await load.done;

      // What the kill left: the spool's files, the committed rows, and renamed files no committed row names.
      const debris = spoolSnapshot(stateDir);
      const rowsAfterKill = await storedRows(stateDir);
      const orphansAfterKill = debris.dayFiles.filter(
        (rel) => !rowsAfterKill.has(path.basename(rel, '.eml')),
      ).length;
      t.diagnostic(
        `cycle ${cycle}: ${load.acked.length} acknowledged, ${load.transportErrors} unacknowledged (connection cut); ` +
          `left behind by the kill: ${debris.tmpFiles.length} temp file(s), ${orphansAfterKill} renamed file(s) without a committed row, ` +
          `${rowsAfterKill.size - load.acked.length - allAcked.length} committed row(s) never acknowledged`,
      );
      assert.deepEqual(
        load.unexpected,
        [],
        `cycle ${cycle}: every answered valid message got a 202`,
      );
      assert.ok(
        load.acked.length > 0,
        `cycle ${cycle}: some messages were acknowledged before the kill`,
      );
      perCycle.push(load.acked.length);
      allAcked.push(...load.acked);
    }

    assert.equal(new Set(allAcked).size, allAcked.length, 'ids are unique across cycles');
    // A kill mid-write leaves a temp file only by chance: one is planted, so the restart must remove it.
    writeFileSync(
      path.join(stateDir, 'spool', 'tmp', 'm.0000000000halfwritten0000.eml.4242.tmp'),
      'From: sender@example.com\r\nSubject: cut off mid-wri',
    );

    // Restarting runs reconciliation; a clean stop then leaves the state dir quiet for inspection.
    const restarted = await spawn(stateDir);
    assert.equal(await stopWhenServing(restarted), 0);

    t.diagnostic(`acknowledged per cycle: ${perCycle.join(', ')} (total ${allAcked.length})`);
    await assertSpoolIntact(stateDir, allAcked);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Reconciliation with real files
// ---------------------------------------------------------------------------------------------

interface Planted {
  tmpFile: string;
  orphanFile: string;
  orphanRel: string;
  missingIds: string[];
  keptIds: string[];
}

/**
 * Sends real messages through an in-process server (then closes it), deletes the files of some
 * of them, and plants a half-written temp file and an .eml without a row.
 */
async function plantCrashDebris(stateDir: string): Promise<Planted> {
  const p = await startTestPostern({ stateDir });
  let keptIds: string[];
  let missingIds: string[];
  try {
    const { liveKey, testKey } = await createProjectWithKeys(p.ctx);
    const send = async (base: string, key: string, overrides: Record<string, unknown> = {}) => {
      const res = await post(base, '/v1/send', { key, json: validMessage(overrides) });
      assert.equal(res.status, 202, res.text);
      return res.body as { id: string; status: string };
    };
    const kept = [
      await send(p.production, liveKey, { subject: 'kept 1' }),
      await send(p.production, liveKey, { subject: 'kept 2' }),
    ];
    assert.deepEqual(
      kept.map((m) => m.status),
      ['queued', 'queued'],
    );
    const inTwoHours = new Date(Date.now() + 2 * 3600_000).toISOString();
    // Over spool.index_body_max_bytes, so each is a spool file that can go missing; the kept
    // ones are small, their bodies in the index, which reconciliation leaves alone.
    const large = 'x'.repeat(70_000);
    const lost = [
      await send(p.production, liveKey, { subject: 'lost queued', text: large }),
      await send(p.production, liveKey, {
        subject: 'lost scheduled',
        scheduled_at: inTwoHours,
        text: large,
      }),
      await send(p.production, liveKey, { subject: 'lost paused', paused: true, text: large }),
      await send(p.sandbox, testKey, { subject: 'lost captured', text: large }),
    ];
    assert.deepEqual(
      lost.map((m) => m.status),
      ['queued', 'scheduled', 'paused', 'captured'],
    );
    keptIds = kept.map((m) => m.id);
    missingIds = lost.map((m) => m.id);
  } finally {
    await p.close();
  }

  const rows = readMessageRows<Row>(stateDir);
  for (const id of missingIds) unlinkSync(path.join(stateDir, 'spool', rows.get(id)!.spool_path));

  const tmpFile = path.join(stateDir, 'spool', 'tmp', 'm.0000000000halfwritten0000.eml.4242.tmp');
  writeFileSync(tmpFile, 'From: sender@example.com\r\nSubject: cut off mid-wri');
  const orphanRel = path.join('2026-01-01', 'm.01jg000000orphanorphan0000.eml');
  const orphanFile = path.join(stateDir, 'spool', orphanRel);
  mkdirSync(path.dirname(orphanFile), { recursive: true });
  writeFileSync(
    orphanFile,
    'Message-ID: <m.01jg000000orphanorphan0000@example.com>\r\nSubject: never acknowledged\r\n\r\nbody\r\n',
  );
  return { tmpFile, orphanFile, orphanRel, missingIds, keptIds };
}

async function assertReconciled(stateDir: string, planted: Planted): Promise<void> {
  assert.equal(existsSync(planted.tmpFile), false, 'the half-written temp file is removed');
  assert.equal(existsSync(planted.orphanFile), false, 'the .eml without an index row is removed');
  const rows = readMessageRows<Row>(stateDir);
  for (const id of planted.missingIds) {
    const row = rows.get(id)!;
    assert.deepEqual(
      { id, status: row.status, last_error: row.last_error },
      { id, status: 'failed', last_error: 'spool_file_missing' },
    );
  }
  for (const id of planted.keptIds) {
    const row = rows.get(id)!;
    assert.deepEqual(
      { id, status: row.status, last_error: row.last_error },
      { id, status: 'queued', last_error: null },
    );
    assert.equal(row.spool_path, '', `${id}: its body is in the index`);
    const data = await readStoredMime(stateDir, row);
    assert.ok(Buffer.isBuffer(data), `${id}: ${String(data)}`);
    assert.equal(data.length, row.size_bytes);
    assert.ok(data.toString('latin1').includes(`Message-ID: <${id}@example.com>`));
  }
  assert.deepEqual(readdirSync(path.join(stateDir, 'spool', 'tmp')), []);
}

// Spool files and their reconciliation are SQLite's: on PostgreSQL a node keeps no spool file.
describe('spool reconciliation at start', { skip: sqliteOnly() }, () => {
  test('removes a temp file and a row-less .eml, fails rows whose file is gone, and leaves accepted messages untouched', async () => {
    const stateDir = newStateDir();
    const planted = await plantCrashDebris(stateDir);

    const p = await startTestPostern({ stateDir });
    try {
      // The server still accepts after reconciling.
      const { liveKey } = await createProjectWithKeys(p.ctx, 'after reconcile');
      const res = await post(p.production, '/v1/send', { key: liveKey, json: validMessage() });
      assert.equal(res.status, 202);
      planted.keptIds.push(res.body.id);
    } finally {
      await p.close();
    }
    await assertReconciled(stateDir, planted);
  });

  test('a real server process logs each reconciliation repair', async () => {
    const stateDir = newStateDir();
    const planted = await plantCrashDebris(stateDir);

    const server = await spawn(stateDir, { POSTERN_LOG_LEVEL: 'info' });
    assert.equal(await stopWhenServing(server), 0);

    const logs = server
      .stderr()
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const byMsg = (msg: string) => logs.filter((l) => l.msg === msg);

    assert.deepEqual(
      byMsg('removed half-written spool file').map((l) => ({ level: l.level, file: l.file })),
      [{ level: 'warn', file: path.basename(planted.tmpFile) }],
    );
    assert.deepEqual(
      byMsg('removed spool file without an index row (unacknowledged write)').map((l) => ({
        level: l.level,
        file: l.file,
      })),
      [{ level: 'warn', file: planted.orphanRel }],
    );
    const rows = readMessageRows<Row>(stateDir);
    assert.deepEqual(
      byMsg('index row without its spool file; message failed')
        .map((l) => ({ level: l.level, message_id: l.message_id, file: l.file }))
        .sort((a, b) => String(a.message_id).localeCompare(String(b.message_id))),
      [...planted.missingIds]
        .sort()
        .map((id) => ({ level: 'error', message_id: id, file: rows.get(id)!.spool_path })),
    );
    assert.deepEqual(
      byMsg('spool reconciled').map((l) => ({
        tempFilesRemoved: l.tempFilesRemoved,
        orphanFilesRemoved: l.orphanFilesRemoved,
        rowsWithoutFile: l.rowsWithoutFile,
      })),
      [{ tempFilesRemoved: 1, orphanFilesRemoved: 1, rowsWithoutFile: planted.missingIds.length }],
    );
    await assertReconciled(stateDir, planted);
  });

  test('a second start after reconciliation finds nothing to repair', async () => {
    const stateDir = newStateDir();
    const planted = await plantCrashDebris(stateDir);
    const first = await spawn(stateDir);
    assert.equal(await stopWhenServing(first), 0);

    const second = await spawn(stateDir, { POSTERN_LOG_LEVEL: 'info' });
    assert.equal(await stopWhenServing(second), 0);
    const reports = second
      .stderr()
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'spool reconciled')
      .map((l) => ({
        tempFilesRemoved: l.tempFilesRemoved,
        orphanFilesRemoved: l.orphanFilesRemoved,
        rowsWithoutFile: l.rowsWithoutFile,
      }));
    assert.deepEqual(reports, [{ tempFilesRemoved: 0, orphanFilesRemoved: 0, rowsWithoutFile: 0 }]);
    await assertReconciled(stateDir, planted);
  });
});

// ---------------------------------------------------------------------------------------------
// 3. Graceful shutdown
// ---------------------------------------------------------------------------------------------

describe('SIGTERM under load', () => {
  const stateDir = newStateDir();
  let code: number | null;
  let load: LoadRun;
  let summary = '';

  before(async () => {
    const { liveKey } = await seedProject(stateDir);
    const server = await spawn(stateDir);
    let exited = false;
    // Clients keep sending after SIGTERM until the server turns them away (their budget only a hang guard).
    load = startLoad(server.production, liveKey, 20, {
      maxPerLoop: 5_000,
      maxMs: HANG_GUARD_MS,
      stopOnError: () => exited,
    });
    await waitForLoad(load, 200, 300, 1_500);
    const ackedBeforeTerm = load.acked.length;
    code = await server.stop().finally(() => {
      exited = true;
    });
    const ackedAtExit = load.acked.length;
    load.stop();
    await load.done;
    summary =
      `SIGTERM under load: ${load.acked.length} acknowledged (${ackedBeforeTerm} before SIGTERM, ${ackedAtExit - ackedBeforeTerm} between SIGTERM and exit), ` +
      `${load.transportErrors} transport errors, loop endings ${JSON.stringify(load.endings)}`;
  });

  test('the server exits 0', (t) => {
    t.diagnostic(summary);
    assert.equal(code, 0);
  });

  test('every answered valid message got a 202, also while shutting down', () => {
    assert.deepEqual(load.unexpected, []);
    assert.ok(load.acked.length > 0);
  });

  test('a graceful stop leaves no temp file and no spooled file without its row', async () => {
    const rows = await storedRows(stateDir);
    const snap = spoolSnapshot(stateDir);
    assert.deepEqual(snap.tmpFiles, []);
    assert.deepEqual(
      snap.dayFiles.filter((rel) => !rows.has(path.basename(rel, '.eml'))),
      [],
    );
  });

  test('every message acknowledged before or during the shutdown is intact after a restart', async () => {
    const restarted = await spawn(stateDir);
    assert.equal(await stopWhenServing(restarted), 0);
    await assertSpoolIntact(stateDir, load.acked);
    // A graceful stop leaves nothing for reconciliation to repair.
    const rows = await storedRows(stateDir);
    assert.deepEqual(
      [...rows.values()].filter((r) => r.status !== 'queued').map((r) => r.id),
      [],
    );
  });

  test('the shutdown completes while keep-alive clients are still sending: every client is turned away', () => {
    // Each loop ends either because the server went away (a transport error after the process
    // exited) or because its own 10 s budget ran out; a server that keeps serving new requests
    // on open keep-alive connections after SIGTERM never exits while clients send.
    // Whether a loop noticed the exit itself or was stopped just after it is a race; what
    // matters is that the server went away before any client's own budget ran out.
    assert.equal(load.endings.budget, 0, JSON.stringify(load.endings));
    assert.equal(load.endings.stopped + load.endings.server_gone, 20);
  });
});

describe('postern start and SIGTERM', () => {
  test('a SIGTERM sent the moment the ready line appears still shuts down gracefully (exit 0)', async () => {
    // A supervisor that waits for the ready line and then stops the service at once: the
    // signal is sent from the first stdout 'data' event, as early as the line can be seen.
    const stateDir = newStateDir();
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const child = spawnChild(process.execPath, [cliPath, 'start', '--json'], {
        env: {
          ...process.env,
          POSTERN_STATE_DIR: stateDir,
          ...ephemeralListenerEnv(),
          POSTERN_LOG_LEVEL: 'warn',
          ...(testStore() === 'postgres'
            ? {
                POSTERN_STORE_BACKEND: 'postgres',
                POSTERN_DATABASE_URL: (await databaseFor(stateDir)).url,
              }
            : {}),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes('\n') && child.signalCode === null && !child.killed)
          child.kill('SIGTERM');
      });
      const outcome = await new Promise<string>((resolve) =>
        child.once('exit', (code, signal) =>
          resolve(code !== null ? `exit ${code}` : `killed by ${signal}`),
        ),
      );
      assert.equal(JSON.parse(stdout.split('\n')[0]).status, 'listening');
      outcomes.push(outcome);
    }
    assert.deepEqual(outcomes, ['exit 0', 'exit 0', 'exit 0', 'exit 0', 'exit 0']);
  });
});
