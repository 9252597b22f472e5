import type { AcceptPipeline } from '../accept/acceptMessage.js';
import type { Clock } from '../clock.js';
import type { AcceptanceCommits } from '../commit/nodeStore.js';
import { StorageFigures } from '../operator/overview.js';
import { MetricsExposition } from '../operator/stateMetrics.js';
import type { DiskGuard } from '../platform/diskSpace.js';
import { Readiness } from '../platform/readiness.js';
import type { Queries } from '../store/queries.js';
import type { CertificatesComponent } from './certificatesComponent.js';
import type { ConsoleComponent } from './consoleComponent.js';
import type { ListeningSockets } from './doors.js';
import type { DeliveryComponent } from './engineComponents.js';

/** The index writer thread is stalled when it does not answer within this (it answers between groups). */
const WRITER_ANSWER_MS = 2000;
/** The spool's size for /metrics is counted (a scan of every message row, in steps) at most this often. */
const METRICS_SPOOL_TTL_MS = 60_000;

/**
 * GET /readyz: the index reads and its writer's last write succeeded, the writer thread answers,
 * the disk is above its guard, every listener is bound, and every TLS listener has a valid certificate.
 */
export function nodeReadiness(parts: {
  pipeline: AcceptPipeline;
  indexWriter: AcceptanceCommits;
  disk: DiskGuard | null;
  sockets: ListeningSockets;
  certificates: CertificatesComponent;
  clock: Clock;
}): Readiness {
  const { pipeline, indexWriter, disk, sockets, certificates, clock } = parts;
  return new Readiness()
    .add('index_writable', async () => {
      if (!(await pipeline.indexAnswers()))
        return { ok: false, detail: 'the index does not answer a query' };
      const status = await indexWriter.status(WRITER_ANSWER_MS);
      if (status?.lastWriteError)
        return {
          ok: false,
          detail: `the last write to the index failed: ${status.lastWriteError}`,
        };
      return { ok: true };
    })
    .add('writer_thread', async () =>
      (await indexWriter.status(WRITER_ANSWER_MS))
        ? { ok: true }
        : {
            ok: false,
            detail: `the index writer thread did not answer within ${WRITER_ANSWER_MS} ms`,
          },
    )
    .add('disk', () => {
      if (!disk) return { ok: true, detail: 'no guard (spool.min_free_bytes: 0)' };
      const { free_bytes: free, min_free_bytes: min } = disk.state;
      return disk.low
        ? {
            ok: false,
            detail: `${free} bytes free, below spool.min_free_bytes (${min}): new mail is refused`,
          }
        : { ok: true };
    })
    .add('listeners', () => {
      const down = sockets.down();
      return down === 0
        ? { ok: true }
        : { ok: false, detail: `${down} listener(s) not accepting connections` };
    })
    .add('certificates', () => certificates.ready(clock.now()));
}

/** GET /metrics' figures of the node's state (metrics.enabled). */
export function nodeMetrics(parts: {
  store: Queries;
  stateDir: string;
  clock: Clock;
  disk: DiskGuard | null;
  indexWriter: AcceptanceCommits;
  delivery: DeliveryComponent;
  sockets: ListeningSockets;
  console: ConsoleComponent;
}): MetricsExposition {
  const { store, clock, disk, indexWriter, delivery, sockets, console } = parts;
  return new MetricsExposition({
    store,
    now: () => clock.now(),
    storage: new StorageFigures(store, parts.stateDir, METRICS_SPOOL_TTL_MS),
    disk,
    throttledAccounts: () => delivery.handOffs.throttledAccounts(),
    smtpSessions: () => sockets.smtpSessions(),
    consoleStreams: () => console.streamFigures(),
    threadSnapshots: async () => [await indexWriter.metrics()],
  });
}
