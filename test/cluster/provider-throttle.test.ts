/**
 * Three Postern nodes on one PostgreSQL deliver through one provider account (docs/scaling.md,
 * "provider throttles"): a throttle the provider gives one node rests the account on every
 * node, so none of them hands off to it before the throttle ends; then every message goes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { releaseMessage } from '../../src/operator/messages.js';
import { attachProvider } from '../../src/operator/providers.js';
import { getValue } from '../../src/store/queries.js';
import { type Cluster, startCluster } from '../support/cluster.js';
import { RESEND_TEST_KEY, startResendEmulator } from '../support/emulators/resend.js';
import { createProjectWithKeys, post, validMessage } from '../support/postern.js';
import { postgresUnavailable } from '../support/postgres.js';
import type { ProviderEmulator } from '../support/providerEmulator.js';
import { HANG_GUARD_MS, waitFor } from '../support/waiting.js';

/**
 * The provider's Retry-After: an hour, longer than anything here takes on a loaded machine. Its
 * end is reached by moving the nodes' clocks (a restart with POSTERN_CLOCK_OFFSET_MS), not waited for.
 */
const THROTTLE_SECONDS = 3600;
/** Due while the account rests, accepted over the three nodes' doors. */
const MESSAGES = 30;

describe('three nodes on one PostgreSQL respect a provider throttle one of them was given', {
  skip: postgresUnavailable(),
}, () => {
  let cluster: Cluster;
  let provider: ProviderEmulator;

  before(async () => {
    provider = await startResendEmulator({ retryAfterSeconds: THROTTLE_SECONDS });
    cluster = await startCluster(['node-a', 'node-b', 'node-c'], {
      // Small polls and a one-second ladder: only the throttle keeps a message from the provider.
      // A few messages per lease, so every node takes some of the ones due at once.
      delivery: { enabled: true, poll_interval_ms: 20, batch_size: 5, retry_ladder_seconds: [1] },
      node: { heartbeat_seconds: 1 },
    });
  });
  after(async () => {
    await cluster?.close();
    await provider?.close();
  });

  test('after the provider throttles one hand-off, no node hands off to that account until the throttle ends, and then every message is delivered', async () => {
    const { ctx } = cluster;
    let nodes = cluster.nodes;
    const proj = await createProjectWithKeys(ctx, 'throttled provider', 'pro', { provider: false });
    const account = await attachProvider(ctx, proj.project.id, {
      slug: 'provider-d-api',
      apiKey: RESEND_TEST_KEY,
      endpoint: provider.url,
    });
    const send = async (i: number, message: Record<string, unknown>, status: string) => {
      const res = await post(nodes[i % nodes.length].production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage(message),
      });
      assert.equal(res.status, 202, res.text);
      assert.equal(res.body.status, status, res.text);
      return res.body.id as string;
    };

    // The mail that will be due while the account rests, accepted by every node's door and held
    // (paused) meanwhile: accepting is the slow part on a busy machine, and is not timed.
    const rest = await Promise.all(
      Array.from({ length: MESSAGES }, (_, i) =>
        send(i, { subject: `held ${i}`, paused: true }, 'paused'),
      ),
    );

    // One message first: its hand-off is the only one in flight when the provider throttles it.
    provider.behave('throttle');
    const first = await send(0, { subject: 'first' }, 'queued');
    const until = await waitFor(
      () =>
        getValue<number>(
          ctx.store,
          'SELECT until FROM provider_throttles WHERE account_id = ?',
          account.id,
        ),
      HANG_GUARD_MS,
      'the throttle recorded',
    );
    const recordedBy = Date.now();
    assert.equal(provider.requests.length, 1);
    const throttledAt = provider.requests[0].receivedAt;
    // Retry-After counted from the hand-off's end: after the provider took the request, before the test saw the throttle.
    assert.ok(
      until >= throttledAt + THROTTLE_SECONDS * 1000 &&
        until <= recordedBy + THROTTLE_SECONDS * 1000,
      `rests until ${until}, ${until - throttledAt} ms from the throttled request`,
    );

    // Released together while the account rests: every node's scheduler leases some of them on
    // its next 20 ms poll (a few per lease) and puts them back for when the throttle ends,
    // without a request to the provider.
    await Promise.all(rest.map((id) => releaseMessage(ctx, id)));
    const putBack = () =>
      getValue<number>(
        ctx.store,
        "SELECT COUNT(*) FROM messages WHERE project_id = ? AND id <> ? AND status = 'queued' AND attempts = 1 AND last_error LIKE '%throttled until%'",
        proj.project.id,
        first,
      );
    await waitFor(
      async () => provider.requests.length > 1 || (await putBack()) === MESSAGES,
      HANG_GUARD_MS,
      'every later message leased and put back',
    );
    assert.equal(
      provider.requests.length,
      1,
      'no hand-off to the resting account before the throttle ends',
    );
    assert.equal(await putBack(), MESSAGES);

    // The throttle ends: every node restarted with its clock past it.
    const offset = String(until + 1000 - Date.now());
    nodes = [];
    for (const node of cluster.nodes)
      nodes.push(await cluster.restart(node, { POSTERN_CLOCK_OFFSET_MS: offset }));

    // Then every message is handed off once.
    await waitFor(
      async () =>
        (await getValue<number>(
          ctx.store,
          "SELECT COUNT(*) FROM messages WHERE project_id = ? AND status = 'sent'",
          proj.project.id,
        )) ===
        MESSAGES + 1,
      HANG_GUARD_MS,
      'every message sent',
    );
    assert.equal(
      provider.requests.length,
      MESSAGES + 2,
      'the throttled request, then one per message',
    );
    const attempts = await ctx.store.all<{ message_id: string; outcomes: string }>(
      "SELECT message_id, string_agg(outcome, ',' ORDER BY started_at) AS outcomes FROM attempts WHERE message_id IN (SELECT id FROM messages WHERE project_id = ?) GROUP BY message_id ORDER BY message_id",
      proj.project.id,
    );
    assert.deepEqual(
      attempts,
      [first, ...rest]
        .sort()
        .map((id) => ({ message_id: id, outcomes: id === first ? 'temporary,sent' : 'sent' })),
      'the provider saw the first message twice and every other once',
    );
  });
});
