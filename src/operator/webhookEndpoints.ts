import { MAIL_EVENT_TYPES } from '../events/envelope.js';
import { newWebhookSecret } from '../events/signing.js';
import { parseTargetUrl, type Resolver, resolveTarget, TargetError } from '../events/targets.js';
import { newEndpointId } from '../ids.js';
import { deliveryCounts } from '../store/webhookDeliveries.js';
import {
  getWebhookEndpoint,
  listWebhookEndpoints,
  type WebhookEndpointRow,
} from '../store/webhookEndpoints.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
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
  const previousActive =
    row.previous_secret !== null &&
    row.previous_secret_expires_at !== null &&
    row.previous_secret_expires_at > ctx.clock.now();
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

export async function requireEndpoint(
  ctx: OperatorContext,
  id: string,
): Promise<WebhookEndpointRow> {
  const row = await getWebhookEndpoint(ctx.store, id);
  if (!row) throw notFound('webhook', id);
  return row;
}

function parseEvents(events: string | undefined): string[] | null {
  if (events === undefined) return null;
  const types = [
    ...new Set(
      events
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean),
    ),
  ];
  if (types.length === 0)
    throw new OperatorError(
      'invalid_argument',
      `--events needs at least one event type (${MAIL_EVENT_TYPES.join(', ')})`,
      'events',
    );
  const unknown = types.filter((t) => !(MAIL_EVENT_TYPES as readonly string[]).includes(t));
  if (unknown.length > 0) {
    throw new OperatorError(
      'invalid_argument',
      `unknown event type${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (one of: ${MAIL_EVENT_TYPES.join(', ')}; webhook.test is always sent by \`webhook test\`)`,
      'events',
    );
  }
  return types;
}

/** The host is resolved now and every address checked (events/targets.ts). The signing secret is returned here, once. */
export async function addWebhook(
  ctx: OperatorContext,
  projectId: string,
  rawUrl: string,
  events?: string,
  opts: TargetOptions = {},
): Promise<WebhookView & { secret: string }> {
  await requireProject(ctx, projectId);
  const types = parseEvents(events);
  const policy = { allowPrivate: ctx.config.webhooks.allow_private_targets };
  let url: URL;
  try {
    url = parseTargetUrl(rawUrl, policy);
    await resolveTarget(url, policy, opts.resolver);
  } catch (err) {
    // In words a person reads in the console as well as the CLI.
    if (err instanceof TargetError)
      throw new OperatorError(
        'invalid_argument',
        `This URL cannot receive webhooks: ${err.message}.`,
        'url',
      );
    throw err;
  }
  const secret = newWebhookSecret();
  const id = newEndpointId();
  const row = {
    id,
    project_id: projectId,
    url: url.href,
    event_types: types === null ? null : JSON.stringify(types),
    secret,
    created_at: ctx.clock.now(),
  };
  await write(ctx, { type: 'webhook_add', row, stamp: auditStamp(ctx) });
  return { ...(await view(ctx, await requireEndpoint(ctx, id))), secret };
}

export async function listWebhooks(
  ctx: OperatorContext,
  projectId: string,
): Promise<{ webhooks: WebhookView[] }> {
  await requireProject(ctx, projectId);
  return {
    webhooks: await Promise.all(
      (await listWebhookEndpoints(ctx.store, projectId)).map((r) => view(ctx, r)),
    ),
  };
}

/** Its pending deliveries end `failed`. */
export async function removeWebhook(
  ctx: OperatorContext,
  id: string,
): Promise<{ id: string; removed: true; cancelled_deliveries: number }> {
  const r = await write(ctx, {
    type: 'webhook_remove',
    id,
    now: ctx.clock.now(),
    stamp: auditStamp(ctx),
  });
  return { id, removed: true, cancelled_deliveries: r.cancelled };
}

/** The previous secret keeps signing as a second `v1` for the grace period, so receivers can switch over; rotating again retires the oldest. */
export async function rotateWebhookSecret(
  ctx: OperatorContext,
  id: string,
): Promise<{ id: string; secret: string; previous_secret_expires_at: string | null }> {
  await requireEndpoint(ctx, id);
  const grace = ctx.config.webhooks.secret_rotation_grace_seconds * 1000;
  const expires = grace > 0 ? ctx.clock.now() + grace : null;
  const secret = newWebhookSecret();
  await write(ctx, {
    type: 'webhook_rotate',
    id,
    secret,
    previous_expires_at: expires,
    stamp: auditStamp(ctx),
  });
  return { id, secret, previous_secret_expires_at: iso(expires) };
}

export async function enableWebhook(
  ctx: OperatorContext,
  id: string,
): Promise<WebhookView & { resumed_deliveries: number }> {
  const { resumed } = await write(ctx, {
    type: 'webhook_enable',
    id,
    now: ctx.clock.now(),
    stamp: auditStamp(ctx),
  });
  return { ...(await view(ctx, await requireEndpoint(ctx, id))), resumed_deliveries: resumed };
}
