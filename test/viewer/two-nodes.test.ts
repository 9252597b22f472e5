/**
 * The public viewer's per-address window on two nodes of one PostgreSQL: real `postern start`
 * processes, requests from one client address spread over both, counted together.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Cluster, type ClusterNode, startCluster } from '../support/cluster.js';
import { postgresUnavailable } from '../support/postgres.js';
import { HANG_GUARD_MS } from '../support/waiting.js';

const VIEWER_PER_IP = 4;
const WINDOW_SECONDS = 60;
/** A well-formed link to no message: answered 404, and counted in the window as any viewer request is. */
const NO_SUCH_LINK = `/view/m.${'0'.repeat(26)}/x`;

/** A viewer request from `address` (behind the trusted proxy): its status and Retry-After. */
async function view(node: ClusterNode, address: string): Promise<[number, string | null]> {
  const res = await fetch(node.production + NO_SUCH_LINK, {
    headers: { 'x-forwarded-for': address },
    signal: AbortSignal.timeout(HANG_GUARD_MS),
  });
  await res.arrayBuffer();
  return [res.status, res.headers.get('retry-after')];
}

describe("the public viewer's per-address window on two nodes of one PostgreSQL", {
  skip: postgresUnavailable(),
}, () => {
  let cluster: Cluster;

  before(async () => {
    cluster = await startCluster(['node-a', 'node-b'], {
      rate_limits: {
        send_per_key: 1e6,
        batch_per_key: 1e6,
        unauthenticated_per_ip: 1e6,
        viewer_per_ip: VIEWER_PER_IP,
        window_seconds: WINDOW_SECONDS,
      },
      // The test is the balancer: each request names its client address.
      http: { trusted_proxies: ['127.0.0.1'] },
      delivery: { enabled: false },
    });
  });
  after(async () => cluster?.close());

  test(`${VIEWER_PER_IP} requests from one address spread over nodes A and B spend its window: the next is answered 429 with Retry-After on either node; another address is not held`, async () => {
    const [a, b] = cluster.nodes;
    const address = '203.0.113.21';
    for (let i = 0; i < VIEWER_PER_IP; i++)
      assert.deepEqual(await view(i % 2 === 0 ? a : b, address), [404, null], `request ${i + 1}`);
    for (const node of [a, b]) {
      const [status, retryAfter] = await view(node, address);
      assert.equal(status, 429, node.id);
      assert.ok(
        Number.isInteger(Number(retryAfter)) &&
          Number(retryAfter) >= 1 &&
          Number(retryAfter) <= WINDOW_SECONDS,
        `Retry-After ${retryAfter}`,
      );
    }
    for (const node of [a, b])
      assert.deepEqual(await view(node, '203.0.113.22'), [404, null], node.id);
  });
});
