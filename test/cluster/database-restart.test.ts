/**
 * Two Postern nodes on one PostgreSQL that restarts under load (docs/scaling.md, "When the
 * database restarts or fails over"): real node processes on a private PostgreSQL of this test's
 * own, stopped (`pg_ctl stop -m fast`, then `-m immediate`: a crash) and started again while
 * HTTP and SMTP clients send to both nodes, with hand-offs held in flight at the relay as the
 * database goes away. Every node stays up, refuses while the database is away (HTTP 500 with
 * the contract's error, SMTP 451, /readyz 503), accepts again once it is back, and every
 * message acknowledged before, between and after is delivered exactly once.
 *
 * Nothing here waits on a duration: each step waits for what it needs to have happened (a
 * refusal seen, an acceptance seen, a message received), with a bound of minutes that only a
 * broken node reaches. The lease is far longer than the test, so a message delivered twice or
 * left `sending` can only come from a node that lost track of a hand-off, never from a lease
 * running out.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey } from '../../src/operator/keys.js';
import { createProject } from '../../src/operator/projects.js';
import { attachProvider } from '../../src/operator/providers.js';
import { addWebhook } from '../../src/operator/webhookEndpoints.js';
import { type Cluster, type ClusterNode, startCluster } from '../support/cluster.js';
import { get, type HttpResult, post, validMessage } from '../support/postern.js';
import { startTestInstance } from '../support/postgres.js';
import { type PostgresInstance, privatePostgresUnavailable } from '../support/privatePostgres.js';
import { sleep } from '../support/processes.js';
import { headerOf, Sink } from '../support/relaySink.js';
import { starttlsTransport } from '../support/smtpTransport.js';
import { WebhookReceiver } from '../support/webhookReceiver.js';

const NODES = ['node-a', 'node-b'];
/** Far beyond the test's length: no lease runs out while it runs. */
const LEASE_MS = 600_000;
/** The bound of every wait: only a node that never gets there reaches it. */
const BOUND_MS = 180_000;
/** HTTP senders per node (plus one SMTP sender): 8 clients on two nodes. */
const HTTP_SENDERS = 3;

/**
 * The database's state as the test drives it. A request is stamped with the phase it was sent
 * in and the one its answer came in; a request sent and answered within one `away` phase met a
 * node whose database was stopped the whole time.
 */
type Phase = 'up' | 'halting' | 'away' | 'starting';
interface Answer {
  node: string;
  door: 'http' | 'smtp';
  subject: string;
  /** When the request went and when its answer came: indexes into the test's list of phases (one per change). */
  sent: number;
  answered: number;
  /** HTTP status or SMTP reply code; 'error' when the connection failed. */
  status: number | 'error';
  id: string | null;
  /** The HTTP body or the SMTP reply, for the assertions' messages. */
  detail: string;
  body?: unknown;
}

let server: PostgresInstance | null = null;
let cluster: Cluster | null = null;
let sink: Sink | null = null;
let receiver: WebhookReceiver | null = null;

after(async () => {
  // A failed test may leave the server stopped: the cluster's database is dropped on it.
  await server?.start();
  await cluster?.close();
  await sink?.close();
  await receiver?.close();
  await server?.stop();
});

/** Waits for `condition`; a node that exits meanwhile fails the wait at once, with its last words. */
async function until<T>(what: string, condition: () => T | Promise<T>): Promise<NonNullable<T>> {
  const deadline = Date.now() + BOUND_MS;
  for (;;) {
    for (const node of cluster?.nodes ?? []) {
      const { exitCode, signalCode } = node.child;
      if (exitCode !== null || signalCode !== null)
        throw new Error(
          `${node.id} exited (${exitCode ?? signalCode}) while waiting for: ${what}\n${node.stderr().slice(-1500)}`,
        );
    }
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`not within ${BOUND_MS / 1000} s: ${what}`);
    await sleep(20);
  }
}

describe('a PostgreSQL restart under load', { skip: privatePostgresUnavailable() }, () => {
  let nodes: ClusterNode[] = [];
  let liveKey = '';
  before(async () => {
    server = await startTestInstance();
    sink = await Sink.start('restart');
    receiver = await WebhookReceiver.start();
    cluster = await startCluster(
      NODES,
      {
        delivery: {
          enabled: true,
          poll_interval_ms: 50,
          lease_ms: LEASE_MS,
          retry_ladder_seconds: [1],
          smtp_timeout_ms: 600_000,
        },
        webhooks: {
          allow_private_targets: true,
          poll_interval_ms: 50,
          retry_ladder_seconds: [1, 1, 1, 1, 1, 1],
          retry_jitter: 0,
        },
        node: { heartbeat_seconds: 1 },
      },
      { server: server.url },
    );
    ({ nodes } = cluster);
    const { ctx } = cluster;
    const project = await createProject(ctx, 'restart', 'pro');
    await attachProvider(ctx, project.id, {
      slug: 'smtp',
      host: '127.0.0.1',
      port: String(sink.port),
      tls: 'none',
      priority: '10',
    });
    await addWebhook(ctx, project.id, receiver.url('/restart'));
    liveKey = (await createKey(ctx, project.id, 'live')).key;
  });

  test('pg_ctl stop -m fast / -m immediate, then start: every node stays up, refuses while away, accepts again, and delivers every acknowledged message once', async (t) => {
    const phases: Phase[] = ['up'];
    const phase = () => phases.length - 1;
    const enter = (p: Phase) => phases.push(p);
    const answers: Answer[] = [];
    let stop = false;
    /** While set, the clients send nothing new (a balancer that took the nodes out of rotation); `busy` counts requests in flight. */
    let paused: Promise<void> | null = null;
    let resumeClients = () => {};
    let busy = 0;

    const record = (a: Omit<Answer, 'answered'>) => answers.push({ ...a, answered: phase() });
    const httpSender = async (node: ClusterNode, s: number) => {
      for (let k = 0; !stop; k++) {
        await paused;
        const subject = `http ${node.id} ${s}.${k}`;
        const sent = phase();
        busy++;
        const res: HttpResult | Error = await post(node.production, '/v1/send', {
          key: liveKey,
          json: validMessage({ subject }),
        }).catch((err: Error) => err);
        busy--;
        if (res instanceof Error)
          record({
            node: node.id,
            door: 'http',
            subject,
            sent,
            status: 'error',
            id: null,
            detail: res.message,
          });
        else
          record({
            node: node.id,
            door: 'http',
            subject,
            sent,
            status: res.status,
            id: res.status === 202 ? (res.body.id as string) : null,
            detail: res.text,
            body: res.body,
          });
        // A client refused backs off a little, as a real one would.
        if (res instanceof Error || res.status !== 202) await sleep(25);
      }
    };
    const smtpSender = async (node: ClusterNode) => {
      for (let k = 0; !stop; k++) {
        await paused;
        const subject = `smtp ${node.id} ${k}`;
        const sent = phase();
        // A session per message: each one authenticates (its key read from the database) and commits.
        const transport = starttlsTransport(node.smtp, liveKey, {
          pool: false,
          socketTimeout: 60_000,
        });
        busy++;
        try {
          const info = await transport.sendMail({
            from: 'app@example.com',
            to: 'ann@example.org',
            subject,
            text: 'hello',
          });
          const m = /queued as (m\.[0-9a-z]{26})/.exec(String(info.response));
          record({
            node: node.id,
            door: 'smtp',
            subject,
            sent,
            status: 250,
            id: m ? m[1] : null,
            detail: String(info.response),
          });
        } catch (err) {
          const e = err as { responseCode?: number; response?: string; message: string };
          record({
            node: node.id,
            door: 'smtp',
            subject,
            sent,
            status: e.responseCode ?? 'error',
            id: null,
            detail: e.response ?? e.message,
          });
          await sleep(25);
        } finally {
          busy--;
          transport.close();
        }
      }
    };
    const senders = nodes.flatMap((node) => [
      ...Array.from({ length: HTTP_SENDERS }, (_, s) => httpSender(node, s)),
      smtpSender(node),
    ]);

    let releaseHeld = () => {};
    const acknowledged = () => answers.filter((a) => a.status === 202 || a.status === 250);
    const figures: string[] = [];

    /**
     * One outage: hand-offs held in flight at the relay, the database stopped by `mode`, every
     * node refusing, the database started, every node accepting. `quiet`: the clients stop before
     * the database starts and resume only once every node says it is ready (a balancer sends
     * nothing to a node that is not): readiness must come back without a request to commit.
     */
    const outage = async (mode: 'fast' | 'immediate', opts: { quiet?: boolean } = {}) => {
      const ackedBefore = acknowledged().length;
      const receivedBefore = sink!.received.length;
      await until(
        'the nodes accept and deliver',
        () =>
          acknowledged().length >= ackedBefore + 40 && sink!.received.length >= receivedBefore + 10,
      );
      // Hand-offs in flight when the database goes: the relay has taken them and not yet answered.
      sink!.behaviour.dataHold = new Promise<void>((resolve) => (releaseHeld = resolve));
      await until('hand-offs held at the relay', () => sink!.held >= 2);
      enter('halting');
      const halting = phase();
      await server!.halt(mode);
      enter('away');
      const away = phase();
      // The held hand-offs end now: their outcomes cannot be recorded until the database is back.
      sink!.behaviour.dataHold = undefined;
      releaseHeld();
      const notReady: Record<string, HttpResult> = {};
      for (const node of nodes) {
        await until(`${node.id} answers HTTP 500 while the database is away`, () =>
          answers.some(
            (a) =>
              a.node === node.id &&
              a.door === 'http' &&
              a.sent === away &&
              a.answered === away &&
              a.status === 500,
          ),
        );
        await until(`${node.id} answers SMTP 451 while the database is away`, () =>
          answers.some(
            (a) =>
              a.node === node.id &&
              a.door === 'smtp' &&
              a.sent === away &&
              a.answered === away &&
              a.status === 451,
          ),
        );
        notReady[node.id] = await until(
          `${node.id} says it is not ready while the database is away`,
          async () => {
            const res = await get(node.production, '/readyz');
            return res.status === 503 ? res : null;
          },
        );
      }
      assert.equal(phase(), away, 'the database stayed away while the nodes were asked');
      if (opts.quiet) {
        paused = new Promise<void>((resolve) => (resumeClients = resolve));
        await until('the clients stop', () => busy === 0);
      }
      enter('starting');
      await server!.start();
      enter('up');
      const back = phase();
      const started = performance.now();
      let readyAfter = '';
      if (opts.quiet) {
        const asked = answers.length;
        for (const node of nodes)
          await until(
            `${node.id} is ready again without a request`,
            async () => (await get(node.production, '/readyz')).status === 200,
          );
        assert.equal(answers.length, asked, 'no request was sent meanwhile');
        readyAfter = `, ready without a request ${((performance.now() - started) / 1000).toFixed(2)} s after`;
        paused = null;
        resumeClients();
      }
      for (const node of nodes) {
        for (const door of ['http', 'smtp'] as const) {
          await until(`${node.id} accepts over ${door} again`, () =>
            answers.some(
              (a) =>
                a.node === node.id &&
                a.door === door &&
                a.sent === back &&
                (a.status === 202 || a.status === 250),
            ),
          );
        }
        await until(
          `${node.id} is ready again`,
          async () => (await get(node.production, '/readyz')).status === 200,
        );
      }
      const refusedHttp = answers.filter(
        (a) => a.door === 'http' && a.status === 500 && a.answered >= halting && a.answered <= back,
      ).length;
      const refusedSmtp = answers.filter(
        (a) => a.door === 'smtp' && a.status === 451 && a.answered >= halting && a.answered <= back,
      ).length;
      figures.push(
        `-m ${mode}${opts.quiet ? ' (clients paused until ready)' : ''}: ${refusedHttp} HTTP 500 and ${refusedSmtp} SMTP 451 while away; every node ready and accepting on both doors ${((performance.now() - started) / 1000).toFixed(2)} s after the database took connections again${readyAfter}`,
      );
      for (const node of nodes)
        assert.deepEqual(
          notReady[node.id].body?.status,
          'not_ready',
          `${node.id}: ${notReady[node.id].text}`,
        );
      for (const node of nodes)
        assert.ok(
          (notReady[node.id].body?.failing as string[] | undefined)?.includes('index_writable'),
          `${node.id}: ${notReady[node.id].text}`,
        );
    };

    try {
      await outage('fast');
      await outage('immediate', { quiet: true });
      // Some more mail once back, then the clients stop.
      const ackedAfter = acknowledged().length;
      await until(
        'the nodes accept after the restarts',
        () => acknowledged().length >= ackedAfter + 40,
      );
    } finally {
      stop = true;
      paused = null;
      resumeClients();
      sink!.behaviour.dataHold = undefined;
      releaseHeld();
      await Promise.all(senders);
    }
    for (const f of figures) t.diagnostic(f);
    t.diagnostic(
      `${answers.length} requests: ${acknowledged().length} acknowledged, ${sink!.received.length} received by the relay so far`,
    );

    // Every node is up: none exited, and no client saw its connection fail.
    for (const node of nodes)
      assert.deepEqual(
        [node.child.exitCode, node.child.signalCode],
        [null, null],
        `${node.id} is still running: ${node.stderr().slice(-2000)}`,
      );
    assert.deepEqual(
      answers.filter((a) => a.status === 'error').map((a) => `${a.node} ${a.door} ${a.detail}`),
      [],
      'no connection failed',
    );

    // Refusals are the contract's: HTTP 500 server_error with the error envelope only, SMTP 451 4.3.0.
    const otherHttp = answers.filter((a) => a.door === 'http' && a.status !== 202);
    for (const a of otherHttp) {
      assert.equal(a.status, 500, `${a.node}: ${a.status} ${a.detail}`);
      const body = a.body as { error?: Record<string, unknown> } | undefined;
      assert.deepEqual(Object.keys(body ?? {}), ['error'], a.detail);
      assert.deepEqual(Object.keys(body!.error!).sort(), ['code', 'message', 'type'], a.detail);
      assert.equal(body!.error!.type, 'api_error', a.detail);
      assert.equal(body!.error!.code, 'server_error', a.detail);
    }
    for (const a of answers.filter((x) => x.door === 'smtp' && x.status !== 250)) {
      assert.equal(a.status, 451, `${a.node}: ${a.detail}`);
      assert.match(a.detail, /^451 4\.3\.0 /, a.detail);
    }
    // Nothing acknowledged by a node whose database was away the whole time.
    const awayPhases = new Set(phases.flatMap((p, i) => (p === 'away' ? [i] : [])));
    assert.deepEqual(
      acknowledged()
        .filter((a) => awayPhases.has(a.sent) && a.answered === a.sent)
        .map((a) => `${a.node} ${a.door} ${a.id}`),
      [],
      'no 202 / 250 while the database was away',
    );

    // Every acknowledged message is in the database.
    const acked = acknowledged();
    assert.ok(
      acked.every((a) => a.id !== null),
      'every acknowledgement names its message',
    );
    assert.equal(new Set(acked.map((a) => a.id)).size, acked.length, 'no id given twice');
    const stored = async () =>
      new Map(
        (
          await cluster!.ctx.store.all<{ id: string; subject: string; status: string }>(
            'SELECT id, subject, status FROM messages',
          )
        ).map((r) => [r.id, r]),
      );
    const rows = await stored();
    assert.deepEqual(
      acked.filter((a) => !rows.has(a.id!)).map((a) => `${a.node} ${a.door} ${a.id}`),
      [],
      'every acknowledged message is in the database',
    );

    // Everything stored is delivered (acknowledged or not: a commit whose answer the database's
    // stop cut off is stored, and the client retries it with its Idempotency-Key), each once.
    await until('every stored message sent', async () =>
      [...(await stored()).values()].every((r) => r.status === 'sent'),
    ).catch(async (err: Error) => {
      const left = [...(await stored()).values()].filter((r) => r.status !== 'sent');
      throw new Error(
        `${err.message}: ${left.length} are not (${left
          .slice(0, 5)
          .map((r) => `${r.id} ${r.status}`)
          .join(', ')})`,
      );
    });
    const finalRows = await stored();
    const subjects = sink!.received.map((r) => headerOf(r.raw, 'Subject'));
    const count = new Map<string, number>();
    for (const s of subjects) count.set(s ?? '', (count.get(s ?? '') ?? 0) + 1);
    assert.deepEqual(
      [...count].filter(([, n]) => n > 1),
      [],
      'no message reached the relay twice',
    );
    assert.deepEqual(
      acked
        .filter((a) => count.get(a.subject) !== 1)
        .map((a) => `${a.node} ${a.door} ${a.subject}`),
      [],
      'every acknowledged message reached the relay once',
    );
    assert.equal(
      subjects.length,
      finalRows.size,
      'the relay received each stored message, and nothing else',
    );
    assert.deepEqual(
      [...finalRows.values()].filter((r) => count.get(r.subject) !== 1).map((r) => r.id),
      [],
      'each stored message reached the relay once',
    );

    // The webhook threads reconnected too: every acknowledged message's mail.accepted and mail.sent arrive.
    const missingEvents = () => {
      const seen = new Set(
        receiver!.received.map((h) => `${h.body?.type} ${h.body?.data?.mail?.uid}`),
      );
      return acked
        .flatMap((a) => ['mail.accepted', 'mail.sent'].map((type) => `${type} ${a.id}`))
        .filter((k) => !seen.has(k));
    };
    await until('every webhook event delivered', () => missingEvents().length === 0);
    const hooks = receiver!.received.map((h) => `${h.body?.type} ${h.body?.data?.mail?.uid}`);
    t.diagnostic(
      `webhooks: ${hooks.length} requests for ${new Set(hooks).size} events (at-least-once)`,
    );

    for (const node of nodes) assert.equal(await node.stop(), 0, `${node.id} stops cleanly`);
  });
});
