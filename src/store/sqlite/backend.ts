import path from 'node:path';
import type { StoreBackend } from '../backend.js';
import { fileSecret, VIEWER_KEY_FILE } from '../viewerKeyFile.js';
import { insertWebhookEndpoint, removeWebhookEndpoint } from '../webhookEndpoints.js';
import { countStoredBodies } from './storedBodies.js';
import { runWebhookCycleSqlite } from './webhookCycle.js';

/**
 * One node's SQLite index: it shares nothing with another node, so throttles and rate windows
 * stay in the process's memory, the viewer key and certificates in the state directory, and
 * the one writer needs no lock to take turns.
 */
export const sqliteBackend: StoreBackend = {
  capabilities: {
    sharedNodeList: false,
    sharedThrottles: false,
    sharedRateWindows: false,
    sharedCertificates: false,
  },
  deliveryLeases: {
    recordThrottle: async () => undefined,
    restingAccounts: async () => [],
    reclaim: async () => [],
  },
  webhookOutbox: {
    runCycle: runWebhookCycleSqlite,
    // The fan-out follows a cursor over events.seq: nothing waits in a queue.
    hasQueuedEvents: async () => false,
    addEndpoint: insertWebhookEndpoint,
    removeEndpoint: removeWebhookEndpoint,
  },
  bodies: { storedFigures: countStoredBodies },
  viewerKey: { secret: async (_q, stateDir) => fileSecret(path.join(stateDir, VIEWER_KEY_FILE)) },
  housekeeping: { take: async () => true },
  // The index's one writer sets its connection's synchronous pragma between transactions
  // (commit/indexWriterThread.ts); inside one it cannot change: the commit keeps the connection's.
  commits: { withoutFlush: async () => undefined },
};
