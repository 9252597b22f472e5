import { storedBodiesByStatistics } from '../activity.js';
import type { StoreBackend } from '../backend.js';
import { reclaimLeases } from '../delivery.js';
import { takeHousekeepingTurn } from './housekeepingLock.js';
import { throttleAccount, throttledAccounts } from './providerThrottles.js';
import { sharedViewerSecret } from './sharedViewerKey.js';
import { runWebhookCycleShared } from './webhookCycle.js';
import {
  hasQueuedEventsPostgres,
  insertWebhookEndpointPostgres,
  removeWebhookEndpointPostgres,
} from './webhookOutbox.js';

/** The PostgreSQL database several nodes share: what one node learns or holds, the others read. */
export const postgresBackend: StoreBackend = {
  capabilities: {
    sharedNodeList: true,
    sharedThrottles: true,
    sharedRateWindows: true,
    sharedCertificates: true,
  },
  deliveryLeases: {
    recordThrottle: async (q, accountId, until) => {
      await throttleAccount(q, accountId, until);
    },
    restingAccounts: async (q, now) => [...(await throttledAccounts(q, now))],
    reclaim: reclaimLeases,
  },
  webhookOutbox: {
    runCycle: runWebhookCycleShared,
    hasQueuedEvents: hasQueuedEventsPostgres,
    addEndpoint: insertWebhookEndpointPostgres,
    removeEndpoint: removeWebhookEndpointPostgres,
  },
  // No scan: the database's own figures (a count by each node every minute would cost more than it is worth).
  bodies: { storedFigures: storedBodiesByStatistics },
  viewerKey: { secret: sharedViewerSecret },
  housekeeping: { take: takeHousekeepingTurn },
  commits: {
    withoutFlush: async (tx) => {
      await tx.run('SET LOCAL synchronous_commit = off');
    },
  },
};
