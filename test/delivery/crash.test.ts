/**
 * Crash durability of the delivery engine: a real Postern process is SIGKILLed while it relays
 * 1,000 messages to a counting SMTP sink; after a restart every accepted message reaches the
 * sink at least once, nothing is lost, and only messages the killed process had leased (and not
 * yet recorded as sent) may arrive twice. The number of duplicates is reported.
 */

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { createKey } from '../../src/operator/keys.js';
import { createProject } from '../../src/operator/projects.js';
import { attachProvider } from '../../src/operator/providers.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { post, type SpawnedPostern, validMessage } from '../support/postern.js';
import { databaseFor, testPool, testStore } from '../support/postgres.js';
import { ProcessScope, sleep, withClosedIndex } from '../support/processes.js';
import { headerOf, Sink } from '../support/relaySink.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

const TOTAL = 1000;
const BATCH = 100;
/** The killed process is stopped once the sink has this many complete messages. */
const KILL_AT = 400;
/** Per-message delay at the sink, so relaying 1,000 messages takes long enough to interrupt. */
const SINK_DELAY_MS = 4;
/**
 * Leases no hand-off outlasts, on a loaded machine too (a lease that ran out under a hand-off
 * still in progress would have it relayed, and recorded sent, twice). The restarted process's
 * clock is moved past it (POSTERN_CLOCK_OFFSET_MS): for it the killed process's leases have run out.
 */
const LEASE_MS = 10 * 60_000;
const RESTART_CLOCK_OFFSET_MS = LEASE_MS + 60_000;
const ID_RE = /^m\.[0-9a-z]{26}$/;

const scope = new ProcessScope();
const sinks: Sink[] = [];

after(async () => {
  await scope.cleanup();
  for (const sink of sinks) await sink.close();
});

/** A complete message the sink received: its Message-ID and the queue number it was given. */
interface Receipt {
  messageId: string | null;
  queueId: string;
}

/** Every complete message the sink received, in order. */
const receiptsOf = (sink: Sink): Receipt[] =>
  sink.received.map((r) => ({
    messageId: headerOf(r.raw, 'Message-ID')?.replace(/^<(.*)>$/, '$1') ?? null,
    queueId: r.queueId,
  }));

/** A pro project with an `smtp` provider pointing at the sink and a live key, written with the operator functions on an index closed afterwards. */
async function seedProject(
  stateDir: string,
  sinkPort: number,
): Promise<{ projectId: string; liveKey: string }> {
  return await withClosedIndex(stateDir, async (ctx) => {
    const project = await createProject(ctx, 'delivery crash', 'pro');
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: String(sinkPort),
      tls: 'none',
      priority: '10',
    });
    return { projectId: project.id, liveKey: (await createKey(ctx, project.id, 'live')).key };
  });
}

function writeConfig(stateDir: string, name: string, delivery: Record<string, unknown>): string {
  const file = path.join(stateDir, name);
  writeFileSync(
    file,
    JSON.stringify({
      rate_limits: { send_per_key: 1e6, batch_per_key: 1e6, unauthenticated_per_ip: 1e6 },
      delivery,
    }),
  );
  return file;
}

const spawn = (
  stateDir: string,
  configFile: string,
  env: Record<string, string> = {},
): Promise<SpawnedPostern> => scope.spawn(stateDir, { POSTERN_CONFIG: configFile, ...env });

/** Rows of the state directory's store, read on a connection of the test's own (read-only on SQLite). */
async function readAll<T>(stateDir: string, text: string): Promise<T[]> {
  if (testStore() === 'postgres') {
    const pool = testPool((await databaseFor(stateDir)).url, 1);
    try {
      return await postgresQueries(pool).all<T>(text);
    } finally {
      await pool.end();
    }
  }
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    return db.prepare(text).all() as T[];
  } finally {
    db.close();
  }
}

const readRows = (stateDir: string) =>
  readAll<{ id: string; status: string; provider_message_id: string | null }>(
    stateDir,
    'SELECT id, status, provider_message_id FROM messages ORDER BY id',
  );

describe('SIGKILL while 1,000 messages are being relayed', () => {
  test('after a restart every accepted message reaches the sink at least once, none is lost, and only messages leased by the killed process are repeated', async (t) => {
    const stateDir = scope.stateDir('postern-delivery-crash-');
    const sink = await Sink.start('crash', { dataDelayMs: SINK_DELAY_MS });
    sinks.push(sink);
    const { liveKey } = await seedProject(stateDir, sink.port);
    const off = writeConfig(stateDir, 'delivery-off.json', { enabled: false });
    const on = writeConfig(stateDir, 'delivery-on.json', {
      enabled: true,
      poll_interval_ms: 50,
      lease_ms: LEASE_MS,
    });

    // 1. Accept 1,000 messages with delivery off: ten concurrent batches of 100.
    const acceptor = await spawn(stateDir, off);
    const answers = await Promise.all(
      Array.from({ length: TOTAL / BATCH }, (_, b) =>
        post(acceptor.production, '/v1/send/batch', {
          key: liveKey,
          json: {
            messages: Array.from({ length: BATCH }, (_, i) =>
              validMessage({ subject: `crash ${b * BATCH + i}`, text: `message ${b * BATCH + i}` }),
            ),
          },
        }),
      ),
    );
    const accepted: string[] = [];
    for (const res of answers) {
      assert.equal(res.status, 207, res.text);
      for (const slot of res.body.data as { id: string; status: string }[]) {
        assert.match(slot.id, ID_RE);
        assert.equal(slot.status, 'queued');
        accepted.push(slot.id);
      }
    }
    assert.equal(new Set(accepted).size, TOTAL);
    assert.equal(await acceptor.stop(), 0);
    assert.equal(sink.received.length, 0, 'nothing is relayed while delivery is off');
    assert.deepEqual(
      (await readRows(stateDir)).map((r) => r.status),
      Array(TOTAL).fill('queued'),
    );

    // 2. Relay with delivery on; SIGKILL the process from inside the sink once it holds KILL_AT messages.
    const relay = await spawn(stateDir, on);
    let killedAt = -1;
    const killed = new Promise<void>((resolve) => {
      sink.behaviour.onReceived = (count) => {
        if (count < KILL_AT || killedAt >= 0) return;
        killedAt = count;
        relay.child.kill('SIGKILL');
        resolve();
      };
    });
    await killed;
    sink.behaviour.onReceived = undefined;
    await relay.kill(); // waits for the exit
    assert.equal(relay.child.signalCode, 'SIGKILL');
    // Let connections the dead process left half-way through DATA close.
    await sleep(100);
    const receivedBeforeRestart = sink.received.length;
    assert.ok(
      receivedBeforeRestart >= KILL_AT && receivedBeforeRestart < TOTAL,
      `killed mid-relay (${receivedBeforeRestart} received)`,
    );
    const afterKill = new Map((await readRows(stateDir)).map((r) => [r.id, r.status]));
    const statusesAfterKill = new Set(afterKill.values());
    for (const s of statusesAfterKill)
      assert.ok(['queued', 'sending', 'sent'].includes(s), `status after the kill: ${s}`);
    const leasedAtKill = [...afterKill].filter(([, s]) => s === 'sending').map(([id]) => id);
    const sentAtKill = [...afterKill].filter(([, s]) => s === 'sent').map(([id]) => id);
    assert.ok(leasedAtKill.length > 0, 'the kill interrupted messages in hand-off');
    // Every message the sink holds was leased by the killed process: recorded `sent`, or still `sending`.
    for (const r of receiptsOf(sink))
      assert.ok(
        r.messageId !== null &&
          ['sent', 'sending'].includes(afterKill.get(r.messageId.split('@')[0]) ?? ''),
        `${r.messageId} was leased`,
      );

    // 3. Restart with delivery on, past the killed process's leases: those are relayed again.
    const restarted = await spawn(stateDir, on, {
      POSTERN_CLOCK_OFFSET_MS: String(RESTART_CLOCK_OFFSET_MS),
    });
    const acceptedSet = new Set(accepted);
    const receivedIds = () => new Set(receiptsOf(sink).map((r) => r.messageId?.split('@')[0]));
    const deadline = Date.now() + HANG_GUARD_MS;
    let rows = await readRows(stateDir);
    while (Date.now() < deadline) {
      const got = receivedIds();
      rows = await readRows(stateDir);
      if (accepted.every((id) => got.has(id)) && rows.every((r) => r.status === 'sent')) break;
      await sleep(100);
    }
    assert.equal(await restarted.stop(), 0);
    rows = await readRows(stateDir);

    // Nothing lost: every accepted id reached the sink at least once, under its own Message-ID.
    const perId = new Map<string, Receipt[]>();
    for (const r of receiptsOf(sink)) {
      assert.ok(r.messageId !== null, 'every relayed message carries a Message-ID');
      assert.match(r.messageId, /^m\.[0-9a-z]{26}@example\.com$/);
      const id = r.messageId.split('@')[0];
      assert.ok(acceptedSet.has(id), `the sink received only accepted messages (${id})`);
      perId.set(id, [...(perId.get(id) ?? []), r]);
    }
    const missing = accepted.filter((id) => !perId.has(id));
    assert.deepEqual(missing, [], 'every accepted message was delivered at least once');

    // Every row ends `sent`, with the queue number of one of the sink's receipts of that message.
    assert.equal(rows.length, TOTAL);
    assert.deepEqual(
      rows.filter((r) => r.status !== 'sent'),
      [],
    );
    for (const row of rows) {
      assert.ok(
        perId.get(row.id)!.some((r) => r.queueId === row.provider_message_id),
        `${row.id}: provider_message_id ${row.provider_message_id} is one of the sink's answers for it`,
      );
    }

    // Exactly one mail.sent event per message, even for those relayed twice.
    const sentEvents = await readAll<{ message_id: string; c: number }>(
      stateDir,
      "SELECT message_id, COUNT(*) AS c FROM events WHERE type = 'mail.sent' GROUP BY message_id",
    );
    assert.equal(sentEvents.length, TOTAL);
    assert.deepEqual(
      sentEvents.filter((e) => e.c !== 1),
      [],
    );

    // Only a message the killed process held as `sending` may be repeated; one recorded `sent` never is.
    const duplicated = [...perId].filter(([, rs]) => rs.length > 1);
    const leased = new Set(leasedAtKill);
    for (const [id, rs] of duplicated)
      assert.ok(
        leased.has(id),
        `${id} was received ${rs.length} times but was not in hand-off at the kill`,
      );
    for (const id of sentAtKill)
      assert.equal(
        perId.get(id)!.length,
        1,
        `${id} was recorded sent before the kill and must not be relayed again`,
      );

    const duplicates = duplicated.reduce((a, [, rs]) => a + rs.length - 1, 0);
    assert.equal(sink.received.length, TOTAL + duplicates);
    t.diagnostic(
      `killed after ${killedAt} messages reached the sink (${receivedBeforeRestart} once connections closed); ` +
        `at the kill ${sentAtKill.length} rows were sent, ${leasedAtKill.length} sending (leased), ${TOTAL - sentAtKill.length - leasedAtKill.length} queued; ` +
        `after the restart all ${TOTAL} delivered; ${duplicates} duplicated (${duplicated.length} messages received twice or more)`,
    );
  });
});
