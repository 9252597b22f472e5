import { envelopeBody, TEST_EVENT_TYPE } from '../events/envelope.js';
import { type AttemptResult, WebhookSender } from '../events/sender.js';
import { newDeliveryId } from '../ids.js';
import { outboxEvent } from '../store/eventOutbox.js';
import { getProject } from '../store/projects.js';
import {
  deliveryAttempts,
  listWebhookAttempts,
  type WebhookAttemptRow,
} from '../store/webhookAttempts.js';
import { getWebhookDelivery, type WebhookDeliveryRow } from '../store/webhookDeliveries.js';
import type { WebhookEndpointRow } from '../store/webhookEndpoints.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { decodeCursor, encodeCursor, pageLimit } from './pages.js';
import { requireEndpoint, type TargetOptions } from './webhookEndpoints.js';
import { write } from './writer.js';

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
async function sendNow(
  ctx: OperatorContext,
  endpoint: WebhookEndpointRow,
  deliveryId: string,
  type: string,
  body: Buffer,
  opts: TargetOptions,
) {
  const c = ctx.config.webhooks;
  const now = ctx.clock.now();
  const secrets = [endpoint.secret];
  if (
    endpoint.previous_secret &&
    endpoint.previous_secret_expires_at !== null &&
    endpoint.previous_secret_expires_at > now
  )
    secrets.push(endpoint.previous_secret);
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
    result = await sender.send(endpoint.id, {
      url: endpoint.url,
      deliveryId,
      type,
      body,
      secrets,
      timestamp: Math.floor(now / 1000),
    });
  } finally {
    sender.close();
  }
  const duration = Math.round(performance.now() - started);
  return {
    started: now,
    at: ctx.clock.now(),
    result,
    attempt: {
      ok: result.ok ? 1 : 0,
      status_code: result.status,
      duration_ms: duration,
      error: result.error,
      answer: result.answer ?? null,
    },
  };
}

export async function testWebhook(
  ctx: OperatorContext,
  id: string,
  opts: TargetOptions = {},
): Promise<WebhookTestResult> {
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
  return {
    id: deliveryId,
    endpoint_id: endpoint.id,
    type: TEST_EVENT_TYPE,
    delivered: result.ok,
    status_code: result.status,
    error: result.error,
    duration_ms: sent.attempt.duration_ms,
  };
}

/** A member's view stops at the endpoint, checked by the caller. */
async function requireDelivery(
  ctx: OperatorContext,
  endpointId: string,
  deliveryId: string,
): Promise<WebhookDeliveryRow> {
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

export async function webhookDelivery(
  ctx: OperatorContext,
  endpointId: string,
  deliveryId: string,
) {
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
export async function redeliverWebhook(
  ctx: OperatorContext,
  endpointId: string,
  deliveryId: string,
  opts: TargetOptions = {},
) {
  const endpoint = await requireEndpoint(ctx, endpointId);
  if (endpoint.removed_at !== null) throw notFound('webhook', endpointId);
  const row = await requireDelivery(ctx, endpointId, deliveryId);
  if (row.status === 'pending')
    throw new OperatorError(
      'conflict',
      `delivery ${deliveryId} is waiting for its next attempt; it can be redelivered once it is delivered or has failed`,
    );
  const body = await deliveryBody(ctx, row);
  if (body === null)
    throw new OperatorError(
      'conflict',
      `the event of delivery ${deliveryId} is no longer kept; it cannot be sent again`,
    );
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
  return {
    id: deliveryId,
    endpoint_id: endpointId,
    type: row.type,
    attempt,
    delivered: result.ok,
    status_code: result.status,
    error: result.error,
    answer: result.answer ?? null,
    duration_ms: sent.attempt.duration_ms,
  };
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
export async function webhookAttempts(
  ctx: OperatorContext,
  id: string,
  opts: { limit?: number; cursor?: string } = {},
): Promise<{ attempts: WebhookAttemptView[]; next_cursor: string | null }> {
  await requireEndpoint(ctx, id);
  const limit = pageLimit(opts.limit, 50, 500);
  let before: { at: number; seq: number } | null = null;
  if (opts.cursor !== undefined) {
    const m = /^(\d{1,15}):(\d{1,15})$/.exec(decodeCursor(opts.cursor));
    if (!m)
      throw new OperatorError('invalid_argument', 'cursor is not one this list gave', 'cursor');
    before = { at: Number(m[1]), seq: Number(m[2]) };
  }
  const rows = await listWebhookAttempts(ctx.store, id, before, limit + 1);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    attempts: page.map(attemptView),
    next_cursor: rows.length > limit ? encodeCursor(`${last.attempted_at}:${last.seq}`) : null,
  };
}
