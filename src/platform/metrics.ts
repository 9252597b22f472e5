/**
 * Counters and histograms, one prom-client registry per isolate: /metrics merges the index writer thread's with the
 * event loop's. State figures are read when scraped (operator/stateMetrics.ts).
 */
import client, { type MetricObjectWithValues, type MetricValue, type Registry } from 'prom-client';

export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

export const metricsRegistry: Registry = new client.Registry();

let recording = true;

export function setMetricsRecording(on: boolean): void {
  recording = on;
}

export function metricsRecording(): boolean {
  return recording;
}

const registers = [metricsRegistry];

const accepted = new client.Counter({
  name: 'postern_messages_accepted_total',
  help: 'Messages accepted (202 / 250), by door and environment.',
  labelNames: ['door', 'environment'],
  registers,
});
const refusals = new client.Counter({
  name: 'postern_refusals_total',
  help: "Requests and messages refused, by door and the contract's error code.",
  labelNames: ['door', 'code'],
  registers,
});
const handoffs = new client.Counter({
  name: 'postern_handoff_attempts_total',
  help: 'Hand-off attempts to provider accounts, by provider slug and outcome (sent, temporary, permanent, account).',
  labelNames: ['provider', 'outcome'],
  registers,
});
const handoffSeconds = new client.Histogram({
  name: 'postern_handoff_duration_seconds',
  help: 'How long one hand-off to a provider took, by provider slug.',
  labelNames: ['provider'],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers,
});
const feedback = new client.Counter({
  name: 'postern_provider_feedback_total',
  help: 'Provider feedback items received (verified, not a replay), by kind: delivered, hard_bounce, soft_bounce, complaint, failed.',
  labelNames: ['kind'],
  registers,
});
const webhookDeliveries = new client.Counter({
  name: 'postern_webhook_deliveries_total',
  help: 'Webhook delivery attempts recorded, by outcome: delivered, retry (failed, another attempt is due), failed (no attempt left).',
  labelNames: ['outcome'],
  registers,
});
const commitGroupSize = new client.Histogram({
  name: 'postern_commit_group_size',
  help: 'Acceptances committed per group (one transaction, one flush).',
  buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
  registers,
});
const commitSeconds = new client.Histogram({
  name: 'postern_commit_duration_seconds',
  help: "A commit group's time: its spool files published, then its transaction.",
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  registers,
});
const httpRequests = new client.Counter({
  name: 'postern_http_requests_total',
  help: 'HTTP requests answered, by listener kind (send, console, plain: http.redirect_plain), route and status.',
  labelNames: ['listener', 'route', 'status'],
  registers,
});
const streamOverflows = new client.Counter({
  name: 'postern_console_stream_overflows_total',
  help: 'Console live-update streams that fell behind (console.stream_max_queued_bytes) and were sent one refresh in place of what they missed.',
  registers,
});
const streamsClosed = new client.Counter({
  name: 'postern_console_streams_closed_total',
  help: 'Console live-update streams the server closed, by reason: authority (its session, token or operator ended), access (its operator lost the project it follows), stalled (still behind at the next check).',
  labelNames: ['reason'],
  registers,
});
for (const reason of ['authority', 'access', 'stalled']) streamsClosed.inc({ reason }, 0);
const nodeInfo = new client.Gauge({
  name: 'postern_node_info',
  help: 'This node: its node.id and version (the value is always 1).',
  labelNames: ['node_id', 'version'],
  registers,
});
const certificateExpiry = new client.Gauge({
  name: 'postern_certificate_expiry_seconds',
  help: 'When each certificate the listeners serve expires (Unix time, seconds), by name: the first domain of tls.acme, a listener name (its cert/key), or smtp.tls. A listener still waiting for its first ACME certificate has none.',
  labelNames: ['name'],
  registers,
});
const certificateOrderFailures = new client.Counter({
  name: 'postern_certificate_order_failures_total',
  help: 'ACME orders (first certificates and renewals) that failed, by certificate name; the certificate served so far is kept.',
  labelNames: ['name'],
  registers,
});

export function countAccepted(door: 'http' | 'smtp', environment: string): void {
  if (recording) accepted.inc({ door, environment });
}

export function countRefusal(door: 'http' | 'smtp', code: string): void {
  if (recording) refusals.inc({ door, code });
}

export function countHandoff(provider: string, outcome: string, seconds: number): void {
  if (!recording) return;
  handoffs.inc({ provider, outcome });
  handoffSeconds.observe({ provider }, seconds);
}

export function countFeedback(kind: string, n = 1): void {
  if (recording) feedback.inc({ kind }, n);
}

export function countWebhookOutcome(outcome: 'delivered' | 'retry' | 'failed'): void {
  if (recording) webhookDeliveries.inc({ outcome });
}

export function observeCommitGroup(size: number, seconds: number): void {
  if (!recording) return;
  commitGroupSize.observe(size);
  commitSeconds.observe(seconds);
}

export function countHttpRequest(
  listener: 'send' | 'console' | 'plain',
  route: string,
  status: number,
): void {
  if (recording) httpRequests.inc({ listener, route, status: String(status) });
}

export function countStreamOverflow(): void {
  if (recording) streamOverflows.inc();
}

export function countStreamClosed(reason: 'authority' | 'access' | 'stalled'): void {
  if (recording) streamsClosed.inc({ reason });
}

/** null: it serves none (a placeholder). */
export function setCertificateExpiry(name: string, notAfter: number | null): void {
  if (!recording) return;
  if (notAfter === null) certificateExpiry.remove({ name });
  else certificateExpiry.set({ name }, Math.floor(notAfter / 1000));
}

/** n = 0: the series shows, at 0, before any has failed. */
export function countCertificateOrderFailure(name: string, n = 1): void {
  if (recording) certificateOrderFailures.inc({ name }, n);
}

/** One series: a server in a test process may be started again. */
export function setNodeInfo(nodeId: string, version: string): void {
  if (!recording) return;
  nodeInfo.reset();
  nodeInfo.set({ node_id: nodeId, version }, 1);
}

export function metricsSnapshot(): Promise<MetricsSnapshot> {
  return metricsRegistry.getMetricsAsJSON() as Promise<MetricsSnapshot>;
}

export function mergedMetrics(snapshots: MetricsSnapshot[]): Registry {
  return client.AggregatorRegistry.aggregate(snapshots);
}

export const METRICS_CONTENT_TYPE = metricsRegistry.contentType;

export { client as promClient };

let processMetricsStarted = false;

/** Once per process. */
export function startProcessMetrics(): void {
  if (processMetricsStarted) return;
  processMetricsStarted = true;
  client.collectDefaultMetrics({ register: metricsRegistry, prefix: 'postern_' });
}
