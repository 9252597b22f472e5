import { envelopeBody, MAIL_EVENT_TYPES, TEST_EVENT_TYPE } from '../events/envelope.js';
import { newDeliveryId, newEndpointId } from '../ids.js';
import { type AttemptResult, WebhookSender } from '../events/sender.js';
import { newWebhookSecret } from '../events/signing.js';
import { parseTargetUrl, resolveTarget, TargetError, type Resolver } from '../events/targets.js';
import { getProject } from '../store/projects.js';
import { deliveryCounts, getWebhookDelivery, getWebhookEndpoint, listWebhookEndpoints, outboxEvent, type WebhookDeliveryRow, type WebhookEndpointRow } from '../store/webhooks.js';
import { deliveryAttempts, listWebhookAttempts, type WebhookAttemptRow } from '../store/webhookAttempts.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { decodeCursor, encodeCursor, pageLimit } from './pages.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

export interface TargetOptions {
  resolver?: Resolver;
  ca?: string | Buffer;
}

export interface WebhookView {
  id: string;
  project_id: string;
  url: string;
  events: string[] | null;
  state: 'enabled' | 'disabled';
  disabled_at: string | null;
  disabled_reason: string | null;
  /** null: the last attempt succeeded, or none yet. */
  failing_since: string | null;
  last_success_at: string | null;
  last_failure_at: string | null;
  /** Until when a rotated-out secret still signs (second v1 entry). */
  previous_secret_expires_at: string | null;
  pending_deliveries: number;
  failed_deliveries: number;
  created_at: string;
}

async function view(ctx: OperatorContext, row: WebhookEndpointRow): Promise<WebhookView> {
  const counts = await deliveryCounts(ctx.store, row.id);
  const previousActive = row.previous_secret !== null && row.previous_secret_expires_at !== null && row.previous_secret_expires_at > ctx.clock.now();
  return {
    id: row.id,
    project_id: row.project_id,
    url: row.url,
    events: row.event_types === null ? null : (JSON.parse(row.event_types) as string[]),
    state: row.disabled_at === null ? 'enabled' : 'disabled',
    disabled_at: iso(row.disabled_at),
    disabled_reason: row.disabled_reason,
    failing_since: iso(row.failing_since),
    last_success_at: iso(row.last_success_at),
    last_failure_at: iso(row.last_failure_at),
    previous_secret_expires_at: previousActive ? iso(row.previous_secret_expires_at) : null,
    pending_deliveries: counts.pending,
    failed_deliveries: counts.failed,
    created_at: iso(row.created_at)!,
  };
}

export async function requireEndpoint(ctx: OperatorContext, id: string): Promise<WebhookEndpointRow> {
  const row = await getWebhookEndpoint(ctx.store, id);
  if (!row) throw notFound('webhook', id);
  return row;
}

function parseEvents(events: string | undefined): string[] | null {
  if (events === undefined) return null;
  const types = [...new Set(events.split(',').map((t) => t.trim()).filter(Boolean))];
  if (types.length === 0) throw new OperatorError('invalid_argument', `--events needs at least one event type (${MAIL_EVENT_TYPES.join(', ')})`, 'events');
  const unknown = types.filter((t) => !(MAIL_EVENT_TYPES as readonly string[]).includes(t));
  if (unknown.length > 0) {
    throw new OperatorError('invalid_argument', `unknown event type${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (one of: ${MAIL_EVENT_TYPES.join(', ')}; webhook.test is always sent by \`webhook test\`)`, 'events');
  }
  return types;
}

/** The host is resolved now and every address checked (events/targets.ts). The signing secret is returned here, once. */
export async function addWebhook(ctx: OperatorContext, projectId: string, rawUrl: string, events?: string, opts: TargetOptions = {}): Promise<WebhookView & { secret: string }> {
  await requireProject(ctx, projectId);
  const types = parseEvents(events);
  const policy = { allowPrivate: ctx.config.webhooks.allow_private_targets };
  let url: URL;
  try {
    url = parseTargetUrl(rawUrl, policy);
    await resolveTarget(url, policy, opts.resolver);
  } catch (err) {
    // In words a person reads in the console as well as the CLI.
    if (err instanceof TargetError) throw new OperatorError('invalid_argument', `This URL cannot receive webhooks: ${err.message}.`, 'url');
    throw err;
  }
  const secret = newWebhookSecret();
  const id = newEndpointId();
  const row = { id, project_id: projectId, url: url.href, event_types: types === null ? null : JSON.stringify(types), secret, created_at: ctx.clock.now() };
  await write(ctx, { type: 'webhook_add', row, stamp: auditStamp(ctx) });
  return { ...(await view(ctx, await requireEndpoint(ctx, id))), secret };
}

export async function listWebhooks(ctx: OperatorContext, projectId: string): Promise<{ webhooks: WebhookView[] }> {
  await requireProject(ctx, projectId);
  return { webhooks: await Promise.all((await listWebhookEndpoints(ctx.store, projectId)).map((r) => view(ctx, r))) };
}

/** Its pending deliveries end `failed`. */
export async function removeWebhook(ctx: OperatorContext, id: string): Promise<{ id: string; removed: true; cancelled_deliveries: number }> {
  const r = await write(ctx, { type: 'webhook_remove', id, now: ctx.clock.now(), stamp: auditStamp(ctx) });
  return { id, removed: true, cancelled_deliveries: r.cancelled };
}

/** The previous secret keeps signing as a second `v1` for the grace period, so receivers can switch over; rotating again retires the oldest. */
export async function rotateWebhookSecret(ctx: OperatorContext, id: string): Promise<{ id: string; secret: string; previous_secret_expires_at: string | null }> {
  await requireEndpoint(ctx, id);
  const grace = ctx.config.webhooks.secret_rotation_grace_seconds * 1000;
  const expires = grace > 0 ? ctx.clock.now() + grace : null;
  const secret = newWebhookSecret();
  await write(ctx, { type: 'webhook_rotate', id, secret, previous_expires_at: expires, stamp: auditStamp(ctx) });
  return { id, secret, previous_secret_expires_at: iso(expires) };
}

export async function enableWebhook(ctx: OperatorContext, id: string): Promise<WebhookView & { resumed_deliveries: number }> {
  const { resumed } = await write(ctx, { type: 'webhook_enable', id, now: ctx.clock.now(), stamp: auditStamp(ctx) });
  return { ...(await view(ctx, await requireEndpoint(ctx, id))), resumed_deliveries: resumed };
}

export interface WebhookTestResult {
  id: string;
  endpoint_id: string;
  type: typeof TEST_EVENT_TYPE;
  delivered: boolean;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

/** Signed, checked and timed as every delivery (the test button, a redelivery). */
async function sendNow(ctx: OperatorContext, endpoint: WebhookEndpointRow, deliveryId: string, type: string, body: Buffer, opts: TargetOptions) {
  const c = ctx.config.webhooks;
  const now = ctx.clock.now();
  const secrets = [endpoint.secret];
  if (endpoint.previous_secret && endpoint.previous_secret_expires_at !== null && endpoint.previous_secret_expires_at > now) secrets.push(endpoint.previous_secret);
  const sender = new WebhookSender({
    timeoutMs: c.timeout_ms,
    policy: { allowPrivate: c.allow_private_targets },
    maxSocketsPerEndpoint: 1,
    resolver: opts.resolver,
    ca: opts.ca,
    now: () => ctx.clock.now(),
  });
  const started = performance.now();
  let result: AttemptResult;
  try {
    result = await sender.send(endpoint.id, { url: endpoint.url, deliveryId, type, body, secrets, timestamp: Math.floor(now / 1000) });
  } finally {
    sender.close();
  }
  const duration = Math.round(performance.now() - started);
  return { started: now, at: ctx.clock.now(), result, attempt: { ok: result.ok ? 1 : 0, status_code: result.status, duration_ms: duration, error: result.error, answer: result.answer ?? null } };
}

export async function testWebhook(ctx: OperatorContext, id: string, opts: TargetOptions = {}): Promise<WebhookTestResult> {
  const endpoint = await requireEndpoint(ctx, id);
  const project = await getProject(ctx.store, endpoint.project_id);
  const deliveryId = newDeliveryId();
  const now = ctx.clock.now();
  const body = envelopeBody(deliveryId, TEST_EVENT_TYPE, now, {
    webhook: { id: endpoint.id, url: endpoint.url },
    project: { uid: endpoint.project_id, name: project?.name ?? null },
  });
  const sent = await sendNow(ctx, endpoint, deliveryId, TEST_EVENT_TYPE, body, opts);
  await write(ctx, {
    type: 'webhook_test',
    delivery_id: deliveryId,
    endpoint_id: endpoint.id,
    event_type: TEST_EVENT_TYPE,
    created_at: now,
    at: sent.at,
    // Kept: a test delivery has no outbox event to build its body from again.
    body: body.toString('utf8'),
    attempt: sent.attempt,
    stamp: auditStamp(ctx),
  });
  const { result } = sent;
  return { id: deliveryId, endpoint_id: endpoint.id, type: TEST_EVENT_TYPE, delivered: result.ok, status_code: result.status, error: result.error, duration_ms: sent.attempt.duration_ms };
}

/** A member's view stops at the endpoint, checked by the caller. */
async function requireDelivery(ctx: OperatorContext, endpointId: string, deliveryId: string): Promise<WebhookDeliveryRow> {
  const row = await getWebhookDelivery(ctx.store, deliveryId);
  if (!row || row.endpoint_id !== endpointId) throw notFound('webhook delivery', deliveryId);
  return row;
}

/** Kept (a test), or built again from its outbox event; null once that is gone. */
async function deliveryBody(ctx: OperatorContext, row: WebhookDeliveryRow): Promise<Buffer | null> {
  if (row.body) return Buffer.from(row.body, 'utf8');
  if (row.event_seq === null) return null;
  const event = await outboxEvent(ctx.store, row.event_seq);
  return event ? envelopeBody(row.id, event.type, event.created_at, event.data) : null;
}

export async function webhookDelivery(ctx: OperatorContext, endpointId: string, deliveryId: string) {
  await requireEndpoint(ctx, endpointId);
  const row = await requireDelivery(ctx, endpointId, deliveryId);
  const body = await deliveryBody(ctx, row);
  return {
    id: row.id,
    endpoint_id: row.endpoint_id,
    type: row.type,
    status: row.status,
    created_at: iso(row.created_at)!,
    request_body: body === null ? null : body.toString('utf8'),
    attempts: (await deliveryAttempts(ctx.store, endpointId, deliveryId)).map(attemptView),
  };
}

/** The same id and body, signed afresh, recorded as its next attempt, never retried; a pending delivery is refused (409). */
export async function redeliverWebhook(ctx: OperatorContext, endpointId: string, deliveryId: string, opts: TargetOptions = {}) {
  const endpoint = await requireEndpoint(ctx, endpointId);
  if (endpoint.removed_at !== null) throw notFound('webhook', endpointId);
  const row = await requireDelivery(ctx, endpointId, deliveryId);
  if (row.status === 'pending') throw new OperatorError('conflict', `delivery ${deliveryId} is waiting for its next attempt; it can be redelivered once it is delivered or has failed`);
  const body = await deliveryBody(ctx, row);
  if (body === null) throw new OperatorError('conflict', `the event of delivery ${deliveryId} is no longer kept; it cannot be sent again`);
  const sent = await sendNow(ctx, endpoint, deliveryId, row.type, body, opts);
  const { attempt } = await write(ctx, {
    type: 'webhook_redeliver',
    delivery_id: deliveryId,
    endpoint_id: endpointId,
    event_type: row.type,
    started_at: sent.started,
    at: sent.at,
    attempt: sent.attempt,
    stamp: auditStamp(ctx),
  });
  const { result } = sent;
  return { id: deliveryId, endpoint_id: endpointId, type: row.type, attempt, delivered: result.ok, status_code: result.status, error: result.error, answer: result.answer ?? null, duration_ms: sent.attempt.duration_ms };
}

export interface WebhookAttemptView {
  delivery_id: string;
  type: string;
  attempt: number;
  attempted_at: string;
  delivered: boolean;
  status_code: number | null;
  duration_ms: number | null;
  error: string | null;
  answer: string | null;
}

const attemptView = (a: WebhookAttemptRow): WebhookAttemptView => ({
  delivery_id: a.delivery_id,
  type: a.type,
  attempt: a.attempt,
  attempted_at: iso(a.attempted_at)!,
  delivered: a.ok === 1,
  status_code: a.status_code,
  duration_ms: a.duration_ms,
  error: a.error,
  answer: a.answer ?? null,
});

/** Newest first by start; cursor: the last row's start and seq. */
export async function webhookAttempts(ctx: OperatorContext, id: string, opts: { limit?: number; cursor?: string } = {}): Promise<{ attempts: WebhookAttemptView[]; next_cursor: string | null }> {
  await requireEndpoint(ctx, id);
  const limit = pageLimit(opts.limit, 50, 500);
  let before: { at: number; seq: number } | null = null;
  if (opts.cursor !== undefined) {
    const m = /^(\d{1,15}):(\d{1,15})$/.exec(decodeCursor(opts.cursor));
    if (!m) throw new OperatorError('invalid_argument', 'cursor is not one this list gave', 'cursor');
    before = { at: Number(m[1]), seq: Number(m[2]) };
  }
  const rows = await listWebhookAttempts(ctx.store, id, before, limit + 1);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { attempts: page.map(attemptView), next_cursor: rows.length > limit ? encodeCursor(`${last.attempted_at}:${last.seq}`) : null };
}
