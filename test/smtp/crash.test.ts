import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import nodemailer, { type Transporter } from 'nodemailer';
import {
  acceptedEventIdsOf,
  assertStoreConsistent,
  leftByKillOf,
  messageRowsOf,
  type StoredRow,
} from '../support/assertions.js';
import {
  createProjectWithKeys,
  get,
  type ProjectWithKeys,
  type SpawnedPostern,
} from '../support/postern.js';
import { ProcessScope, sleep, withClosedIndex } from '../support/processes.js';
import { readStoredMime } from '../support/storedMime.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

// ---------------------------------------------------------------------------------------------
// Local helpers
// ---------------------------------------------------------------------------------------------

const ACCEPTED_RE = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;
const SESSIONS = 20;

const scope = new ProcessScope();
after(() => scope.cleanup());

const newStateDir = () => scope.stateDir('postern-smtp-crash-');

/** Relaying turned off where the config knows about it: accepted messages stay `queued`. */
const NO_DELIVERY = { delivery: { enabled: false } };

/**
 * A project on `pro` with an smtp provider, made through the operator functions, and a config
 * file whose request limits are far above the offered load (the default 600 sends a minute
 * would refuse part of it with 451) and which relays nothing (what is checked is the spool).
 */
async function seed(stateDir: string): Promise<{ keys: ProjectWithKeys; configFile: string }> {
  const configFile = path.join(stateDir, 'crash.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      rate_limits: { send_per_key: 1e9, batch_per_key: 1e9, unauthenticated_per_ip: 1e9 },
      ...NO_DELIVERY,
    }),
  );
  return {
    keys: await withClosedIndex(stateDir, (ctx) =>
      createProjectWithKeys(ctx, 'smtp crash project', 'pro'),
    ),
    configFile,
  };
}

const spawn = (stateDir: string, configFile: string): Promise<SpawnedPostern> =>
  scope.spawn(stateDir, { POSTERN_CONFIG: configFile });

/** SIGTERM after one /healthz round trip (the process is past its start-up code). */
async function stopWhenServing(server: SpawnedPostern): Promise<number | null> {
  const health = await get(server.production, '/healthz');
  assert.equal(health.status, 200, health.text);
  return server.stop();
}

function starttlsPort(server: SpawnedPostern): number {
  const listener = server.listeners.find(
    (l) => l.protocol === 'smtp' && l.environment === 'production' && l.url.startsWith('smtp://'),
  );
  assert.ok(listener, 'a production STARTTLS listener');
  return listener.port;
}

// A 48 KiB attachment on some messages makes the spool writes long enough to be cut in half.
const ATTACHMENT_B64 = Buffer.alloc(48 * 1024, 'postern-smtp-crash-')
  .toString('base64')
  .replace(/.{76}/g, '$&\r\n');

/**
 * What was sent, to check the stored file against: `marker` is in the Subject; for raw
 * messages (sent without a Message-ID, so the server adds `<id@example.com>`) `body` is every
 * byte after the header block, which the server must store unchanged; composed messages carry
 * nodemailer's own Message-ID.
 */
interface Sent {
  marker: string;
  raw: boolean;
  body: string | null;
  messageId: string | null;
}

function rawMessage(marker: string, withAttachment: boolean): { raw: string; body: string } {
  const head = `From: Sender <sender@example.com>\r\nTo: rcpt@example.org\r\nSubject: ${marker}\r\nMIME-Version: 1.0\r\n`;
  if (!withAttachment) {
    const body = `Plain body of ${marker}.\r\n.A line that starts with a dot.\r\nLast line.\r\n`;
    return { raw: `${head}Content-Type: text/plain; charset=utf-8\r\n\r\n${body}`, body };
  }
  const boundary = `b-${marker.replace(/\W/g, '-')}`;
  const body =
    `--${boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nBody of ${marker}.\r\n` +
    `--${boundary}\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="blob.bin"\r\nContent-Transfer-Encoding: base64\r\n\r\n${ATTACHMENT_B64}\r\n` +
    `--${boundary}--\r\n`;
  return {
    raw: `${head}Content-Type: multipart/mixed; boundary="${boundary}"\r\n\r\n${body}`,
    body,
  };
}

interface LoadRun {
  acked: Map<string, Sent>;
  /** SMTP refusals (a correct server gives none to these valid messages). */
  unexpected: string[];
  /** Connection-level failures: unacknowledged by definition. */
  transportErrors: number;
  stop(): void;
  done: Promise<void>;
}

/**
 * `SESSIONS` concurrent senders over STARTTLS + AUTH, each sending one message after another:
 * the even ones on a pooled connection (up to 50 messages per session), the odd ones on a new
 * connection per message. Half the messages are composed by nodemailer, half sent raw; every
 * third carries a 48 KiB attachment.
 */
function startLoad(
  port: number,
  key: string,
  cycle: number,
  opts: { maxPerLoop: number; maxMs: number },
): LoadRun {
  let stopped = false;
  const run: LoadRun = {
    acked: new Map(),
    unexpected: [],
    transportErrors: 0,
    stop: () => {
      stopped = true;
    },
    done: Promise.resolve(),
  };
  const deadline = Date.now() + opts.maxMs;
  const transports: Transporter[] = [];
  const loop = async (n: number) => {
    const pooled = n % 2 === 0;
    const transport = nodemailer.createTransport({
      host: '127.0.0.1',
      port,
      secure: false,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
      auth: { user: `crash-${n}`, pass: key },
      connectionTimeout: 5_000,
      greetingTimeout: 5_000,
      socketTimeout: 10_000,
      ...(pooled ? { pool: true, maxConnections: 1, maxMessages: 50 } : {}),
    });
    transport.on('error', () => {}); // a pool whose server vanished reports it here too
    transports.push(transport);
    for (let i = 0; i < opts.maxPerLoop && !stopped && Date.now() < deadline; i++) {
      const marker = `smtp crash ${cycle}.${n}.${i}`;
      const withAttachment = i % 3 === 2;
      const raw = i % 2 === 1;
      let sent: Sent;
      let mail: Parameters<Transporter['sendMail']>[0];
      if (raw) {
        const m = rawMessage(marker, withAttachment);
        sent = { marker, raw: true, body: m.body, messageId: null };
        mail = { envelope: { from: 'sender@example.com', to: ['rcpt@example.org'] }, raw: m.raw };
      } else {
        sent = { marker, raw: false, body: null, messageId: null };
        mail = {
          from: 'Sender <sender@example.com>',
          to: 'rcpt@example.org',
          subject: marker,
          text: `Body of ${marker}.`,
          ...(withAttachment
            ? {
                attachments: [
                  { filename: 'blob.bin', content: Buffer.from(ATTACHMENT_B64, 'base64') },
                ],
              }
            : {}),
        };
      }
      try {
        const info = await transport.sendMail(mail);
        const m = ACCEPTED_RE.exec(String(info.response));
        if (m) {
          if (!raw) sent.messageId = String(info.messageId);
          run.acked.set(m[1], sent);
        } else run.unexpected.push(String(info.response));
      } catch (err) {
        const e = err as { responseCode?: number; response?: string };
        if (typeof e.responseCode === 'number' && e.responseCode >= 400) {
          run.unexpected.push(String(e.response));
        } else {
          run.transportErrors++;
          await sleep(5);
        }
      }
    }
  };
  run.done = Promise.all(Array.from({ length: SESSIONS }, (_, n) => loop(n))).then(() => {
    for (const t of transports) t.close();
  });
  return run;
}

async function waitForAcks(run: LoadRun, minAcked: number, maxMs: number): Promise<void> {
  const start = Date.now();
  while (run.acked.size < minAcked && Date.now() - start < maxMs) await sleep(10);
}

interface Row extends StoredRow {
  subject: string;
  last_error: string | null;
}

/** Every acknowledged message: a queued smtp row, its event, and its complete MIME (file, or body in the index or the database); no debris. */
async function assertSpoolIntact(stateDir: string, acked: Map<string, Sent>): Promise<void> {
  const rows = await messageRowsOf<Row>(stateDir);
  const events = await acceptedEventIdsOf(stateDir);

  assert.deepEqual(
    [...acked.keys()].filter((id) => !rows.has(id)),
    [],
    'every acknowledged id has a messages row',
  );

  const problems: string[] = [];
  for (const [id, sent] of acked) {
    const row = rows.get(id)!;
    if (row.status !== 'queued')
      problems.push(`${id}: status ${row.status} (last_error ${row.last_error})`);
    if (row.source !== 'smtp') problems.push(`${id}: source ${row.source}`);
    if (row.last_error !== null) problems.push(`${id}: last_error ${row.last_error}`);
    if (row.subject !== sent.marker)
      problems.push(
        `${id}: subject ${JSON.stringify(row.subject)}, sent ${JSON.stringify(sent.marker)}`,
      );
    if (!events.has(id)) problems.push(`${id}: no mail.accepted event`);
    const stored = await readStoredMime(stateDir, row);
    if (typeof stored === 'string') {
      problems.push(`${id}: ${stored}`);
      continue;
    }
    const data = stored.toString('latin1');
    if (data.length !== row.size_bytes)
      problems.push(`${id}: stored MIME is ${data.length} bytes, row says ${row.size_bytes}`);
    if (
      !data.includes(`\r\nSubject: ${sent.marker}\r\n`) &&
      !data.startsWith(`Subject: ${sent.marker}\r\n`)
    )
      problems.push(`${id}: file lacks its Subject`);
    const expectedMessageId = sent.raw ? `<${id}@example.com>` : sent.messageId;
    if (!data.includes(`Message-ID: ${expectedMessageId}\r\n`))
      problems.push(`${id}: file lacks Message-ID ${expectedMessageId}`);
    if (sent.body !== null) {
      const split = data.indexOf('\r\n\r\n');
      if (split < 0 || data.slice(split + 4) !== sent.body)
        problems.push(
          `${id}: stored body differs from the body sent (${data.length - split - 4} vs ${sent.body.length} bytes)`,
        );
    }
  }
  assert.deepEqual(
    problems,
    [],
    'every acknowledged message is a queued smtp row with its complete MIME (file or body in the index)',
  );

  await assertStoreConsistent(stateDir, rows);
}

// ---------------------------------------------------------------------------------------------
// Suite
// ---------------------------------------------------------------------------------------------

describe('SIGKILL during concurrent SMTP DATA', () => {
  test('every message answered 250 survives two kill -9 cycles with its row and intact MIME file; reconciliation leaves no orphan or temp file', async (t) => {
    const stateDir = newStateDir();
    const { keys, configFile } = await seed(stateDir);
    const allAcked = new Map<string, Sent>();
    const perCycle: number[] = [];

    for (let cycle = 1; cycle <= 2; cycle++) {
      const server = await spawn(stateDir, configFile);
      // The kill comes once 300 are acknowledged: at once on a quiet machine, later on a loaded
      // one (the bounds only keep a broken server from hanging the test).
      const load = startLoad(starttlsPort(server), keys.liveKey, cycle, {
        maxPerLoop: 400,
        maxMs: HANG_GUARD_MS,
      });
      await waitForAcks(load, 300, HANG_GUARD_MS);
      const killed = server.kill(); // SIGKILL is sent synchronously; sessions are mid-DATA
      load.stop();
      await killed;
      await load.done;

      const {
        debris,
        rows: rowsAfterKill,
        orphans: orphansAfterKill,
      } = await leftByKillOf<Row>(stateDir);
      t.diagnostic(
        `cycle ${cycle}: ${load.acked.size} answered 250, ${load.transportErrors} cut off; left behind by the kill: ` +
          `${debris.tmpFiles.length} temp file(s), ${orphansAfterKill} renamed file(s) without a committed row, ` +
          `${rowsAfterKill.size - load.acked.size - allAcked.size} committed row(s) never acknowledged`,
      );
      assert.deepEqual(
        load.unexpected,
        [],
        `cycle ${cycle}: every answered valid message got a 250`,
      );
      assert.ok(
        load.acked.size >= 300,
        `cycle ${cycle}: at least 300 messages were acknowledged before the kill (${load.acked.size})`,
      );
      perCycle.push(load.acked.size);
      for (const [id, sent] of load.acked) {
        assert.equal(allAcked.has(id), false, `id ${id} acknowledged twice`);
        allAcked.set(id, sent);
      }
    }

    // Restarting runs reconciliation; a clean stop leaves the state dir quiet for inspection.
    const restarted = await spawn(stateDir, configFile);
    assert.equal(await stopWhenServing(restarted), 0);

    t.diagnostic(`answered 250 per cycle: ${perCycle.join(', ')} (total ${allAcked.size})`);
    await assertSpoolIntact(stateDir, allAcked);
  });
});
