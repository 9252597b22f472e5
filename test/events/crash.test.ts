/**
 * Crash durability of the webhook dispatcher: a real Postern process is SIGKILLed while it
 * delivers the webhooks of 1,000 accepted messages to a receiver; after a restart every event
 * reaches the receiver at least once, under one delivery id per event, none is lost, and only
 * deliveries whose outcome the killed process had not recorded arrive twice. The number of
 * duplicates is reported.
 */

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { createKey } from '../../src/operator/keys.js';
import { createProject } from '../../src/operator/projects.js';
import { attachProvider } from '../../src/operator/providers.js';
import { addWebhook } from '../../src/operator/webhookEndpoints.js';
import { postgresQueries } from '../../src/store/postgres/queries.js';
import { post, type SpawnedPostern, validMessage } from '../support/postern.js';
import { databaseFor, testPool, testStore } from '../support/postgres.js';
import { ProcessScope, sleep, withClosedIndex } from '../support/processes.js';
import { HANG_GUARD_MS } from '../support/waiting.js';
import { type ReceivedWebhook, WebhookReceiver } from '../support/webhookReceiver.js';

const TOTAL = 1000;
const BATCH = 100;
/** The process is killed once the receiver has had this many requests. */
const KILL_AT = 400;
/** Per-request delay at the receiver, so 1,000 deliveries take long enough to interrupt. */
const RECEIVER_DELAY_MS = 5;
/**
 * A timeout no attempt meets and leases no attempt outlasts, on a loaded machine too (an attempt
 * timed out though received is sent again). The restarted process's clock is moved past them
 * (POSTERN_CLOCK_OFFSET_MS): for it the killed process's claims have run out.
 */
const TIMEOUT_MS = 10 * 60_000;
const LEASE_MS = TIMEOUT_MS + 2000;
const RESTART_CLOCK_OFFSET_MS = LEASE_MS + 60_000;

const scope = new ProcessScope();
let receiver: WebhookReceiver | null = null;
after(async () => {
  await scope.cleanup();
  await receiver?.close();
});

/** Project, key, an (unused) provider and the endpoint, written before the server owns the directory (or its database). */
async function seed(
  stateDir: string,
  url: string,
): Promise<{ liveKey: string; secret: string; endpointId: string }> {
  return withClosedIndex(stateDir, async (base) => {
    const ctx = {
      ...base,
      config: {
        ...base.config,
        webhooks: { ...base.config.webhooks, allow_private_targets: true },
      },
    };
    const project = await createProject(ctx, 'webhook crash', 'pro');
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: '9',
      tls: 'none',
    });
    const hook = await addWebhook(ctx, project.id, url);
    return {
      liveKey: (await createKey(ctx, project.id, 'live')).key,
      secret: hook.secret,
      endpointId: hook.id,
    };
  });
}

function writeConfig(stateDir: string, name: string, webhooks: Record<string, unknown>): string {
  const file = path.join(stateDir, name);
  writeFileSync(
    file,
    JSON.stringify({
      rate_limits: { send_per_key: 1e6, batch_per_key: 1e6, unauthenticated_per_ip: 1e6 },
      delivery: { enabled: false },
      webhooks,
    }),
  );
  return file;
}

interface DeliveryState {
  id: string;
  event_seq: number;
  status: string;
  attempts: number;
}

const DELIVERIES = 'SELECT id, event_seq, status, attempts FROM webhook_deliveries ORDER BY seq';

/** The deliveries as stored, read from outside the server (a read-only SQLite connection, or the state directory's database). */
async function readDeliveries(stateDir: string): Promise<DeliveryState[]> {
  if (testStore() === 'postgres') {
    const pool = testPool((await databaseFor(stateDir)).url, 1);
    try {
      return await postgresQueries(pool).all<DeliveryState>(DELIVERIES);
    } finally {
      await pool.end();
    }
  }
  const db = new Database(path.join(stateDir, 'postern.db'), { readonly: true });
  try {
    return db.prepare(DELIVERIES).all() as DeliveryState[];
  } finally {
    db.close();
  }
}

describe('SIGKILL while 1,000 webhook deliveries are pending', () => {
  test('after a restart every event is delivered at least once under one delivery id, none lost; only unrecorded deliveries repeat', async (t) => {
    const stateDir = scope.stateDir('postern-webhook-crash-');
    receiver = await WebhookReceiver.start();
    const r = receiver;
    r.respond = () => ({ status: 200, delayMs: RECEIVER_DELAY_MS });
    const { liveKey, secret, endpointId } = await seed(stateDir, r.url());
    const off = writeConfig(stateDir, 'webhooks-off.json', { enabled: false });
    const on = writeConfig(stateDir, 'webhooks-on.json', {
      enabled: true,
      allow_private_targets: true,
      poll_interval_ms: 20,
      timeout_ms: TIMEOUT_MS,
      lease_ms: LEASE_MS,
    });
    const spawn = (config: string, env: Record<string, string> = {}): Promise<SpawnedPostern> =>
      scope.spawn(stateDir, { POSTERN_CONFIG: config, ...env });

    // 1. 1,000 messages accepted with the dispatcher off: 1,000 mail.accepted events wait in the outbox.
    const acceptor = await spawn(off);
    const answers = await Promise.all(
      Array.from({ length: TOTAL / BATCH }, (_, b) =>
        post(acceptor.production, '/v1/send/batch', {
          key: liveKey,
          json: {
            messages: Array.from({ length: BATCH }, (_, i) =>
              validMessage({ subject: `crash ${b * BATCH + i}` }),
            ),
          },
        }),
      ),
    );
    const accepted = answers.flatMap((res) => {
      assert.equal(res.status, 207, res.text);
      return (res.body.data as { id: string }[]).map((slot) => slot.id);
    });
    assert.equal(new Set(accepted).size, TOTAL);
    assert.equal(await acceptor.stop(), 0);
    assert.equal(r.received.length, 0, 'nothing is sent while webhooks are off');
    assert.equal((await readDeliveries(stateDir)).length, 0, 'nothing fanned out yet');

    // 2. Dispatcher on; SIGKILL from inside the receiver once it has had KILL_AT requests.
    const sender = await spawn(on);
    let killedAt = -1;
    await new Promise<void>((resolve) => {
      void r.waitUntil(() => {
        if (r.received.length >= KILL_AT && killedAt < 0) {
          killedAt = r.received.length;
          sender.child.kill('SIGKILL');
          resolve();
        }
        return killedAt >= 0;
      });
    });
    await sender.kill();
    assert.equal(sender.child.signalCode, 'SIGKILL');
    await sleep(100);
    const receivedBeforeRestart = r.received.length;
    const atKill = await readDeliveries(stateDir);
    const deliveredAtKill = new Set(
      atKill.filter((d) => d.status === 'delivered').map((d) => d.id),
    );
    assert.ok(
      receivedBeforeRestart >= KILL_AT && receivedBeforeRestart < TOTAL,
      `killed mid-way (${receivedBeforeRestart} received)`,
    );
    assert.ok(
      atKill.every((d) => d.status === 'delivered' || d.status === 'pending'),
      'nothing failed',
    );
    const pendingAtKill = atKill.length - deliveredAtKill.size + (TOTAL - atKill.length);
    assert.ok(
      pendingAtKill > 0 && deliveredAtKill.size > 0,
      `pending at the kill: ${pendingAtKill}`,
    );

    // 3. Restart: the rest, and the deliveries the killed process had claimed (after their lease).
    const restarted = await spawn(on, { POSTERN_CLOCK_OFFSET_MS: String(RESTART_CLOCK_OFFSET_MS) });
    const uids = () => new Set(r.received.map((h) => h.body.data.mail.uid as string));
    // At SCHED_IDLE the dispatcher waits for idle CPU: as long as a busy machine takes (a hang guard).
    const deadline = Date.now() + HANG_GUARD_MS;
    while (Date.now() < deadline) {
      const done = await readDeliveries(stateDir);
      if (
        uids().size === TOTAL &&
        done.length === TOTAL &&
        done.every((d) => d.status === 'delivered')
      )
        break;
      await sleep(100);
    }
    assert.equal(await restarted.stop(), 0);
    const rows = await readDeliveries(stateDir);

    // Nothing lost: one delivery row per event, all delivered.
    assert.equal(rows.length, TOTAL, 'one delivery per event');
    assert.equal(new Set(rows.map((d) => d.event_seq)).size, TOTAL, 'no event fanned out twice');
    assert.deepEqual(
      rows.filter((d) => d.status !== 'delivered'),
      [],
    );
    // Every accepted message's event arrived, under exactly one delivery id, correctly signed.
    const byUid = new Map<string, ReceivedWebhook[]>();
    for (const h of r.received) {
      assert.equal(h.body.type, 'mail.accepted');
      const sig = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(h.headers['x-service-signature'] as string);
      assert.ok(sig, 'signature header');
      assert.equal(
        createHmac('sha256', secret).update(`${sig[1]}.`).update(h.raw).digest('hex'),
        sig[2],
      );
      const list = byUid.get(h.body.data.mail.uid) ?? [];
      list.push(h);
      byUid.set(h.body.data.mail.uid, list);
    }
    assert.deepEqual(
      accepted.filter((id) => !byUid.has(id)),
      [],
      'every accepted message was delivered at least once',
    );
    assert.equal(byUid.size, TOTAL);
    const rowIds = new Set(rows.map((d) => d.id));
    for (const [uid, hooks] of byUid) {
      assert.equal(
        new Set(hooks.map((h) => h.body.id)).size,
        1,
        `${uid}: one delivery id across its repeats`,
      );
      assert.ok(rowIds.has(hooks[0].body.id));
    }
    // Only a delivery whose outcome the killed process had not recorded may arrive twice.
    const repeated = [...byUid.values()].filter((hooks) => hooks.length > 1);
    for (const hooks of repeated)
      assert.ok(
        !deliveredAtKill.has(hooks[0].body.id),
        `${hooks[0].body.id} was recorded delivered before the kill and must not be sent again`,
      );
    const duplicates = r.received.length - TOTAL;
    assert.equal(
      duplicates,
      repeated.reduce((a, hooks) => a + hooks.length - 1, 0),
    );
    assert.ok(r.received.filter((h) => h.headers['x-service-delivery'] !== h.body.id).length === 0);
    t.diagnostic(
      `endpoint ${endpointId}: killed after ${killedAt} requests (${receivedBeforeRestart} once connections closed); at the kill ${atKill.length} deliveries fanned out, ` +
        `${deliveredAtKill.size} recorded delivered, ${pendingAtKill} pending; after the restart all ${TOTAL} delivered; ${duplicates} duplicate requests (${repeated.length} deliveries repeated)`,
    );
  });
});
