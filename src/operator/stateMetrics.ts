import client, { type Registry } from 'prom-client';
import { MESSAGE_STATUSES } from '../contract/messageStates.js';
import type { DiskGuard } from '../platform/diskSpace.js';
import { type MetricsSnapshot, mergedMetrics, metricsSnapshot } from '../platform/metrics.js';
import {
  messageCountsByStatus,
  oldestQueuedMessage,
  pendingWebhookDeliveries,
} from '../store/activity.js';
import type { Queries } from '../store/queries.js';
import type { StorageFigures } from './overview.js';

export interface StateMetricSources {
  store: Queries;
  now(): number;
  storage: StorageFigures;
  disk: DiskGuard | null;
  throttledAccounts(): number;
  smtpSessions(): number;
  consoleStreams(): { open: number; queuedPeakBytes: number };
  threadSnapshots(): Promise<MetricsSnapshot[]>;
}

/** GET /metrics: the recorded counters merged with the state read now; the spool's size is reused for up to a minute. */
export class MetricsExposition {
  private readonly registry: Registry = new client.Registry();
  private readonly messages = this.gauge(
    'postern_messages',
    'Messages in the index now, by status.',
    ['status'],
  );
  private readonly oldest = this.gauge(
    'postern_oldest_waiting_message_age_seconds',
    'Age of the oldest message waiting to be handed off (queued: due or on the retry ladder); 0 when none waits.',
  );
  private readonly throttled = this.gauge(
    'postern_provider_accounts_throttled',
    'Provider accounts the scheduler rests now because their provider asked it to wait.',
  );
  private readonly webhookBacklog = this.gauge(
    'postern_webhook_backlog',
    'Webhook deliveries waiting (pending: due or on the retry ladder).',
  );
  private readonly spoolBytes = this.gauge(
    'postern_spool_bytes',
    'Bytes of stored MIME the index accounts for (counted at most once a minute).',
  );
  private readonly spoolFiles = this.gauge(
    'postern_spool_files',
    'Stored MIME files the index accounts for (counted at most once a minute).',
  );
  private readonly diskFree = this.gauge(
    'postern_state_disk_free_bytes',
    "Free bytes on the state directory's filesystem (for unprivileged users).",
  );
  private readonly diskMin = this.gauge(
    'postern_state_disk_min_free_bytes',
    'spool.min_free_bytes: below it new mail is refused.',
  );
  private readonly smtpSessions = this.gauge(
    'postern_smtp_sessions_open',
    'SMTP sessions open now.',
  );
  private readonly streamsOpen = this.gauge(
    'postern_console_streams_open',
    'Console live-update streams open now.',
  );
  private readonly streamQueuePeak = this.gauge(
    'postern_console_stream_queued_bytes_peak',
    'The most bytes any console live-update stream has had waiting for its client since the node started (held to console.stream_max_queued_bytes).',
  );

  constructor(private readonly sources: StateMetricSources) {}

  private gauge(name: string, help: string, labelNames: string[] = []): client.Gauge {
    return new client.Gauge({ name, help, labelNames, registers: [this.registry] });
  }

  async text(): Promise<string> {
    const { store, storage, disk } = this.sources;
    const now = this.sources.now();
    const counts = new Map((await messageCountsByStatus(store)).map((r) => [r.status, r.count]));
    for (const status of MESSAGE_STATUSES) this.messages.set({ status }, counts.get(status) ?? 0);
    const oldest = await oldestQueuedMessage(store, null);
    this.oldest.set(oldest ? Math.max(0, (now - oldest.created_at) / 1000) : 0);
    this.throttled.set(this.sources.throttledAccounts());
    this.webhookBacklog.set(await pendingWebhookDeliveries(store));
    const spool = await storage.spool(now);
    this.spoolBytes.set(spool.bytes);
    this.spoolFiles.set(spool.files);
    if (disk) {
      const state = await disk.check();
      this.diskFree.set(state.free_bytes);
      this.diskMin.set(state.min_free_bytes);
    }
    this.smtpSessions.set(this.sources.smtpSessions());
    const streams = this.sources.consoleStreams();
    this.streamsOpen.set(streams.open);
    this.streamQueuePeak.set(streams.queuedPeakBytes);
    const snapshots = [
      await metricsSnapshot(),
      ...(await this.sources.threadSnapshots()),
      (await this.registry.getMetricsAsJSON()) as MetricsSnapshot,
    ];
    return mergedMetrics(snapshots).metrics();
  }
}

export const METRICS_TEXT_TYPE = client.Registry.PROMETHEUS_CONTENT_TYPE;
