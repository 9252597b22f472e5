/**
 * Three Postern nodes on one PostgreSQL (CLUSTER.md): real processes, real sockets, one shared
 * database. One node is SIGKILLed under mixed HTTP and SMTP load; every message any node
 * acknowledged (202 or 250) is then delivered by the survivors once the dead node's leases run
 * out, and every webhook event of those messages reaches the endpoint.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey } from '../../src/operator/keys.js';
import { createProject } from '../../src/operator/projects.js';
import { attachProvider } from '../../src/operator/providers.js';
import { addWebhook } from '../../src/operator/webhookEndpoints.js';
import { type Cluster, type ClusterNode, startCluster } from '../support/cluster.js';
import { post, validMessage } from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';
import { sleep } from '../support/processes.js';
import { headerOf, Sink } from '../support/relaySink.js';
import { starttlsTransport } from '../support/smtpTransport.js';
import { HANG_GUARD_MS } from '../support/waiting.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const LEASE_MS = 3000;
const NODES = ['node-a', 'node-b', 'node-c'];
const ID_RE = /^m\.[0-9a-z]{26}$/;

let cluster: Cluster | null = null;
let sink: Sink | null = null;
let receiver: WebhookReceiver | null = null;

after(async () => {
  await cluster?.close();
  await sink?.close();
  await receiver?.close();
});

/**
 * The Subject of each message the sink receives, in arrival order, duplicates included: every
 * send has a Subject of its own (an SMTP client's message keeps its own Message-ID, so that
 * header does not name Postern's id).
 */
const received = () => sink!.received.map((r) => headerOf(r.raw, 'Subject'));

describe('three nodes on one PostgreSQL', { skip: postgresUnavailable() }, () => {
  let nodes: ClusterNode[] = [];
  let liveKey = '';
  before(async () => {
    // A little slower than instant, so the kill finds hand-offs in flight.
    sink = await Sink.start('cluster', { dataDelayMs: 3 });
    const sinkPort = sink.port;
    receiver = await WebhookReceiver.start();
    cluster = await startCluster(NODES, {
      delivery: { enabled: true, poll_interval_ms: 50, lease_ms: LEASE_MS },
      webhooks: {
        allow_private_targets: true,
        lease_ms: LEASE_MS,
        poll_interval_ms: 50,
        retry_ladder_seconds: [1, 1, 1],
        retry_jitter: 0,
      },
      node: { heartbeat_seconds: 1 },
    });
    ({ nodes } = cluster);
    const { ctx } = cluster;
    const project = await createProject(ctx, 'cluster', 'pro');
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: String(sinkPort),
      tls: 'none',
      priority: '10',
    });
    await addWebhook(ctx, project.id, receiver.url('/cluster'));
    liveKey = (await createKey(ctx, project.id, 'live')).key;
  });

  test('one node SIGKILLed under HTTP and SMTP load: the survivors deliver every acknowledged message, and every webhook event arrives', async () => {
    const acknowledged: string[] = [];
    /** The Subject each acknowledged message was sent with. */
    const subjectOf = new Map<string, string>();
    let stop = false;
    // Load: per node, an HTTP sender and an SMTP sender, each one message at a time, until told to stop.
    const senders = nodes.flatMap((node, i) => [
      (async () => {
        for (let k = 0; !stop; k++) {
          const subject = `http ${i}.${k}`;
          const res = await post(node.production, '/v1/send', {
            key: liveKey,
            json: validMessage({ subject }),
          }).catch(() => null);
          if (!res) return; // the node is gone
          if (res.status === 202) {
            acknowledged.push(res.body.id as string);
            subjectOf.set(res.body.id as string, subject);
          }
        }
      })(),
      (async () => {
        const transport = starttlsTransport(node.smtp, liveKey, {
          pool: false,
          socketTimeout: 10_000,
        });
        try {
          for (let k = 0; !stop; k++) {
            const subject = `smtp ${i}.${k}`;
            const info = await transport
              .sendMail({ from: 'app@example.com', to: 'ann@example.org', subject, text: 'hello' })
              .catch(() => null);
            if (!info) return;
            const m = /queued as (m\.[0-9a-z]{26})/.exec(String(info.response));
            if (m) {
              acknowledged.push(m[1]);
              subjectOf.set(m[1], subject);
            }
          }
        } finally {
          transport.close();
        }
      })(),
    ]);
    // Kill node B once the cluster has acknowledged some mail and the sink has started receiving.
    // (Every deadline here is a hang guard: a loaded machine only takes longer.)
    const deadline = Date.now() + HANG_GUARD_MS;
    while ((acknowledged.length < 150 || sink!.received.length < 30) && Date.now() < deadline)
      await sleep(20);
    assert.ok(acknowledged.length >= 150, `load ran (${acknowledged.length} acknowledged)`);
    await nodes[1].kill();
    assert.equal(nodes[1].child.signalCode, 'SIGKILL');
    // A little more load on the survivors, then stop.
    const atKill = acknowledged.length;
    const more = Date.now() + HANG_GUARD_MS;
    while (acknowledged.length < atKill + 100 && Date.now() < more) await sleep(20);
    stop = true;
    await Promise.all(senders);

    // One id space across nodes and doors.
    assert.equal(new Set(acknowledged).size, acknowledged.length, 'no id given twice');
    for (const id of acknowledged) assert.match(id, ID_RE);

    // Every acknowledged message reaches the sink (the dead node's after its leases expire).
    const until = Date.now() + HANG_GUARD_MS;
    const missing = () => {
      const got = new Set(received());
      return acknowledged.filter((id) => !got.has(subjectOf.get(id)!));
    };
    while (missing().length > 0 && Date.now() < until) await sleep(100);
    assert.deepEqual(
      missing(),
      [],
      `every acknowledged message delivered (${acknowledged.length} acknowledged, ${sink!.received.length} received)`,
    );

    // Every acknowledged message's mail.accepted and mail.sent events reach the endpoint.
    const hooks = () =>
      new Set(receiver!.received.map((h) => `${h.body?.type} ${h.body?.data?.mail?.uid}`));
    const missingEvents = () => {
      const seen = hooks();
      return acknowledged
        .flatMap((id) => ['mail.accepted', 'mail.sent'].map((type) => `${type} ${id}`))
        .filter((k) => !seen.has(k));
    };
    while (missingEvents().length > 0 && Date.now() < until + HANG_GUARD_MS) await sleep(100);
    assert.deepEqual(missingEvents(), [], 'every webhook event delivered');

    // In the database: every acknowledged message sent.
    const rows = await cluster!.ctx.store.all<{ id: string; status: string }>(
      'SELECT id, status FROM messages',
    );
    const status = new Map(rows.map((r) => [r.id, r.status]));
    assert.deepEqual(
      acknowledged.filter((id) => status.get(id) !== 'sent'),
      [],
      'every acknowledged message is sent',
    );
    for (const n of [nodes[0], nodes[2]]) assert.equal(await n.stop(), 0);
  });
});
