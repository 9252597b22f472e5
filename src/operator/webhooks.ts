import { envelopeBody, MAIL_EVENT_TYPES, TEST_EVENT_TYPE } from '../events/envelope.js';
import { newDeliveryId, newEndpointId } from '../ids.js';
import { WebhookSender } from '../events/sender.js';
import { newWebhookSecret } from '../events/signing.js';
import { parseTargetUrl, resolveTarget, TargetError, type Resolver } from '../events/targets.js';
import { getProject } from '../store/projects.js';
import { deliveryCounts, getWebhookEndpoint, listWebhookEndpoints, type WebhookEndpointRow } from '../store/webhooks.js';
import { listWebhookAttempts, type WebhookAttemptRow } from '../store/webhookAttempts.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { decodeCursor, encodeCursor, pageLimit } from './pages.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

/** Test seams: DNS resolution and extra trusted CAs. */
export interface TargetOptions {
  resolver?: Resolver;
  ca?: string | Buffer;
}

export interface WebhookView {
  id: string;
  project_id: string;
  url: string;
  /** Subscribed event types; null: every type. */
  events: string[] | null;
  state: 'enabled' | 'disabled';
  disabled_at: string | null;
  disabled_reason: string | null;
  /** Start of the current run of failed attempts (null: the last attempt succeeded, or none yet). */
  failing_since: string | null;
  last_success_at: string | null;
  last_failure_at: string | null;
  /** While a rotated-out secret still signs (second v1 entry): until when. */
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

/**
 * Registers an endpoint for the project's lifecycle events (all of them, or `events`). The URL
 * must be https:// to a public address (or, with `webhooks.allow_private_targets`, may be a
 * loopback/private one, also over http://); the host is resolved now and every address checked.
 * The signing secret is returned here, once.
 */
export async function addWebhook(ctx: OperatorContext, projectId: string, rawUrl: string, events?: string, opts: TargetOptions = {}): Promise<WebhookView & { secret: string }> {
  await requireProject(ctx, projectId);
  const types = parseEvents(events);
  const policy = { allowPrivate: ctx.config.webhooks.allow_private_targets };
  let url: URL;
  try {
    url = parseTargetUrl(rawUrl, policy);
    await resolveTarget(url, policy, opts.resolver);
  } catch (err) {
    if (err instanceof TargetError) throw new OperatorError('invalid_argument', `--url refused: ${err.message}`, 'url');
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

/** Removes the endpoint: nothing more is sent to it; its pending deliveries end `failed`. */
export async function removeWebhook(ctx: OperatorContext, id: string): Promise<{ id: string; removed: true; cancelled_deliveries: number }> {
  const r = await write(ctx, { type: 'webhook_remove', id, now: ctx.clock.now(), stamp: auditStamp(ctx) });
  return { id, removed: true, cancelled_deliveries: r.cancelled };
}

/**
 * A new secret, returned once. The previous one keeps signing, as a second `v1` entry, for
 * `webhooks.secret_rotation_grace_seconds` (24 h by default), so receivers can switch over
 * without rejecting a delivery. Rotating again within that time retires the oldest secret.
 */
export async function rotateWebhookSecret(ctx: OperatorContext, id: string): Promise<{ id: string; secret: string; previous_secret_expires_at: string | null }> {
  await requireEndpoint(ctx, id);
  const grace = ctx.config.webhooks.secret_rotation_grace_seconds * 1000;
  const expires = grace > 0 ? ctx.clock.now() + grace : null;
  const secret = newWebhookSecret();
  await write(ctx, { type: 'webhook_rotate', id, secret, previous_expires_at: expires, stamp: auditStamp(ctx) });
  return { id, secret, previous_secret_expires_at: iso(expires) };
}

/**
 * Re-enables an endpoint (disabled after failing, or never disabled): its failure run starts
 * over and its pending deliveries are due at once.
 */
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

/**
 * Sends one `webhook.test` event to the endpoint now, from this process, with the same
 * signing, target checks, timeout and redirect rules as every delivery, and reports the answer.
 * It is recorded as a delivery of the endpoint but never retried, and does not count towards
 * the endpoint's failure run. A disabled endpoint can be tested (to check it before `enable`).
 */
export async function testWebhook(ctx: OperatorContext, id: string, opts: TargetOptions = {}): Promise<WebhookTestResult> {
  const endpoint = await requireEndpoint(ctx, id);
  const project = await getProject(ctx.store, endpoint.project_id);
  const c = ctx.config.webhooks;
  const deliveryId = newDeliveryId();
  const now = ctx.clock.now();
  const body = envelopeBody(deliveryId, TEST_EVENT_TYPE, now, {
    webhook: { id: endpoint.id, url: endpoint.url },
    project: { uid: endpoint.project_id, name: project?.name ?? null },
  });
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
  let result;
  try {
    result = await sender.send(endpoint.id, { url: endpoint.url, deliveryId, type: TEST_EVENT_TYPE, body, secrets, timestamp: Math.floor(now / 1000) });
  } finally {
    sender.close();
  }
  const duration = Math.round(performance.now() - started);
  const at = ctx.clock.now();
  await write(ctx, {
    type: 'webhook_test',
    delivery_id: deliveryId,
    endpoint_id: endpoint.id,
    event_type: TEST_EVENT_TYPE,
    created_at: now,
    at,
    attempt: { ok: result.ok ? 1 : 0, status_code: result.status, duration_ms: duration, error: result.error },
    stamp: auditStamp(ctx),
  });
  return { id: deliveryId, endpoint_id: endpoint.id, type: TEST_EVENT_TYPE, delivered: result.ok, status_code: result.status, error: result.error, duration_ms: duration };
}

export interface WebhookAttemptView {
  delivery_id: string;
  type: string;
  attempt: number;
  attempted_at: string;
  delivered: boolean;
  status_code: number | null;
  duration_ms: number | null;
  /** Why it failed, with the start of the receiver's answer (`HTTP 500: …`); null when delivered. */
  error: string | null;
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
});

/** An endpoint's delivery log: every attempt, newest first, a page at a time (kept as long as finished deliveries). */
export async function webhookAttempts(ctx: OperatorContext, id: string, opts: { limit?: number; cursor?: string } = {}): Promise<{ attempts: WebhookAttemptView[]; next_cursor: string | null }> {
  await requireEndpoint(ctx, id);
  const limit = pageLimit(opts.limit, 50, 500);
  const before = opts.cursor === undefined ? null : Number(decodeCursor(opts.cursor));
  if (before !== null && !Number.isInteger(before)) throw new OperatorError('invalid_argument', 'cursor is not one this list gave', 'cursor');
  const rows = await listWebhookAttempts(ctx.store, id, before, limit + 1);
  const page = rows.slice(0, limit);
  return { attempts: page.map(attemptView), next_cursor: rows.length > limit ? encodeCursor(String(page[page.length - 1].seq)) : null };
}
