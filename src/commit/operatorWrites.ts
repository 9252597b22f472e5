import { removableFrom } from '../contract/messageStates.js';
import type {
  ProviderAccount,
  ProviderAccountSecrets,
  ProviderAccountSettings,
} from '../contract/providerAccount.js';
import { createApiKey, credentialState, type KeyMode } from '../policy/apiKeys.js';
import { getApiKey, revokeApiKey, shortenApiKeyExpiry } from '../store/apiKeys.js';
import { type AuditRow, insertAudit } from '../store/audit.js';
import { backendOf } from '../store/backendOf.js';
import { type DkimKeyRow, removeDkimKey, storeDkimKey } from '../store/dkimKeys.js';
import {
  ACTION_FROM,
  applyMessageAction,
  deleteCapturedMessage,
  type MessageAction,
} from '../store/messageActions.js';
import { getMessage, projectHeldMessages, transitionMessage } from '../store/messages.js';
import {
  countActiveOperatorTokens,
  deleteOperatorSession,
  deleteOperatorSessions,
  getOperatorToken,
  insertOperatorSession,
  insertOperatorToken,
  revokeOperatorToken,
  revokeOperatorTokens,
  touchOperatorSession,
  touchOperatorToken,
} from '../store/operatorSessions.js';
import {
  countOwners,
  deleteOperator,
  findOperatorByEmail,
  getOperator,
  insertOperator,
  type OperatorRole,
  type OperatorRow,
  operatorProjectIds,
  setOperatorPassword,
  setOperatorProjects,
  setOperatorRole,
} from '../store/operators.js';
import {
  getProject,
  insertProject,
  markProjectDeleted,
  setProjectPaused,
  setProjectPlan,
  setProjectStrategy,
} from '../store/projects.js';
import {
  detachProviderAccount,
  findProviderAccount,
  insertProviderAccount,
  setProviderAccountConfig,
  setProviderAccountLimits,
} from '../store/providerAccounts.js';
import type { Queries } from '../store/queries.js';
import { addSuppression, removeSuppression, type SuppressionRow } from '../store/suppressions.js';
import { insertViewerLink, revokeViewerLink, type ViewerLinkRow } from '../store/viewerLinks.js';
import { insertWebhookAttempt, type WebhookAttemptRow } from '../store/webhookAttempts.js';
import { insertWebhookDelivery, recordRedelivery } from '../store/webhookDeliveries.js';
import { enableWebhookEndpoint, rotateWebhookSecret } from '../store/webhookEndpoints.js';

/** The operator layer's single writes, as plain data: each operation's checks, change and audit row as one transaction. */

export type AuditStamp = Pick<AuditRow, 'at' | 'actor' | 'actor_email' | 'client_ip'>;

export interface WriteRefusal {
  code: 'not_found' | 'conflict';
  message: string;
}

/** Rolled back; crosses the thread as a WriteRefusal. */
export class WriteRefused extends Error {
  constructor(readonly refusal: WriteRefusal) {
    super(refusal.message);
  }
}

const notFound = (what: string, id: string) =>
  new WriteRefused({ code: 'not_found', message: `${what} ${id} not found` });
const conflict = (message: string) => new WriteRefused({ code: 'conflict', message });

async function audit(
  q: Queries,
  stamp: AuditStamp,
  action: string,
  target: string | null,
  details?: Record<string, unknown>,
): Promise<void> {
  await insertAudit(q, {
    ...stamp,
    action,
    target,
    details: details === undefined ? null : JSON.stringify(details),
  });
}

/** A Buffer crosses a MessagePort as a bare Uint8Array. */
const hex = (value: string) => Buffer.from(value, 'hex');

export interface PasswordSetResult {
  sessions_ended: number;
  tokens_revoked: number;
  tokens_active: number;
}

export interface OperatorWrites {
  session_start: [
    {
      id_hash: string;
      operator_id: string;
      now: number;
      client_ip: string | null;
      stamp: AuditStamp;
    },
    null,
  ];
  session_end: [{ id_hash: string; operator_id: string; stamp: AuditStamp }, null];
  session_touch: [{ id_hash: string; now: number; seen: number }, null];
  token_touch: [{ token_id: string; now: number }, null];
  /** Every session but `keep_session` ends; `revoke_tokens`: active tokens too; `must_change`: generated (a reset). */
  password_set: [
    {
      operator_id: string;
      password_hash: string;
      now: number;
      must_change: boolean;
      keep_session: string | null;
      revoke_tokens: boolean;
      action: 'operator.change_password' | 'operator.reset_password';
      stamp: AuditStamp;
    },
    PasswordSetResult,
  ];
  token_create: [
    {
      row: {
        id: string;
        operator_id: string;
        name: string;
        token_hash: string;
        hint: string;
        created_at: number;
        expires_at: number | null;
      };
      stamp: AuditStamp;
    },
    null,
  ];
  token_revoke: [{ id: string; now: number; stamp: AuditStamp }, null];
  operator_create: [{ row: OperatorRow; projects: string[]; stamp: AuditStamp }, null];
  operator_remove: [{ id: string; stamp: AuditStamp }, null];
  operator_update: [
    { id: string; role: OperatorRole | null; projects: string[] | null; stamp: AuditStamp },
    null,
  ];
  project_create: [
    { row: { id: string; name: string; plan: string; created_at: number }; stamp: AuditStamp },
    null,
  ];
  project_change: [
    {
      id: string;
      change: { strategy: string } | { plan: string } | { deleted_at: number };
      stamp: AuditStamp;
    },
    null,
  ];
  project_pause: [
    { id: string; paused: boolean; now: number; stamp: AuditStamp },
    { released: number },
  ];
  key_create: [
    {
      project_id: string;
      mode: KeyMode;
      name: string;
      now: number;
      expires_at: number | null;
      stamp: AuditStamp;
    },
    { id: string; key: string },
  ];
  key_revoke: [{ id: string; now: number; stamp: AuditStamp }, null];
  key_rotate: [
    { id: string; now: number; grace_seconds: number; stamp: AuditStamp },
    { id: string; key: string },
  ];
  provider_attach: [{ row: Omit<ProviderAccount, 'detached_at'>; stamp: AuditStamp }, null];
  provider_detach: [{ id: string; now: number; stamp: AuditStamp }, null];
  /** Each secret given replaces the old one (audited by name only). */
  provider_update: [
    {
      id: string;
      priority: number | null;
      free_quota?: number | null;
      settings?: Partial<ProviderAccountSettings>;
      secrets?: ProviderAccountSecrets;
      stamp: AuditStamp;
    },
    null,
  ];
  suppression_add: [{ row: SuppressionRow; stamp: AuditStamp }, null];
  suppression_remove: [{ project_id: string; email: string; stamp: AuditStamp }, null];
  dkim_add: [{ row: Omit<DkimKeyRow, 'removed_at'>; stamp: AuditStamp }, null];
  dkim_remove: [{ id: string; now: number; stamp: AuditStamp }, null];
  webhook_add: [
    {
      row: {
        id: string;
        project_id: string;
        url: string;
        event_types: string | null;
        secret: string;
        created_at: number;
      };
      stamp: AuditStamp;
    },
    null,
  ];
  webhook_remove: [{ id: string; now: number; stamp: AuditStamp }, { cancelled: number }];
  webhook_rotate: [
    { id: string; secret: string; previous_expires_at: number | null; stamp: AuditStamp },
    null,
  ];
  webhook_enable: [{ id: string; now: number; stamp: AuditStamp }, { resumed: number }];
  webhook_test: [
    {
      delivery_id: string;
      endpoint_id: string;
      event_type: string;
      created_at: number;
      at: number;
      body: string;
      attempt: Omit<
        WebhookAttemptRow,
        'seq' | 'delivery_id' | 'endpoint_id' | 'type' | 'attempt' | 'attempted_at'
      >;
      stamp: AuditStamp;
    },
    null,
  ];
  /** Refused while it is pending. */
  webhook_redeliver: [
    {
      delivery_id: string;
      endpoint_id: string;
      event_type: string;
      started_at: number;
      at: number;
      attempt: Omit<
        WebhookAttemptRow,
        'seq' | 'delivery_id' | 'endpoint_id' | 'type' | 'attempt' | 'attempted_at'
      >;
      stamp: AuditStamp;
    },
    { attempt: number },
  ];
  message_one: [{ action: MessageAction; id: string; now: number; stamp: AuditStamp }, null];
  message_delete: [{ id: string; stamp: AuditStamp }, { spool_path: string | null }];
  /** The link itself is a credential, never recorded. */
  message_link: [{ id: string; link: Omit<ViewerLinkRow, 'revoked_at'>; stamp: AuditStamp }, null];
  message_link_revoke: [{ id: string; link_id: string; now: number; stamp: AuditStamp }, null];
}

export type OperatorWriteType = keyof OperatorWrites;
export type OperatorWrite = {
  [K in OperatorWriteType]: { type: K } & OperatorWrites[K][0];
}[OperatorWriteType];

const either = (statuses: readonly string[]) =>
  statuses.length === 1 ? statuses[0] : `${statuses.slice(0, -1).join(', ')} or ${statuses.at(-1)}`;

const ACTION_WORDS: Record<MessageAction, string> = {
  release: `only ${either(ACTION_FROM.release)} messages can be released`,
  cancel: `only ${either(ACTION_FROM.cancel)} messages can be cancelled`,
  retry: `only a ${either(ACTION_FROM.retry)} message (waiting for its next attempt) can be retried now`,
};

async function requireOperatorRow(q: Queries, id: string): Promise<OperatorRow> {
  const row = await getOperator(q, id);
  if (!row) throw notFound('operator', id);
  return row;
}

/** Someone must be able to manage the rest. */
async function keepAnOwner(q: Queries, row: OperatorRow): Promise<void> {
  if (row.role === 'owner' && (await countOwners(q)) <= 1)
    throw conflict(`operator ${row.id} is the last owner; make another operator an owner first`);
}

async function requireAttachedAccount(q: Queries, id: string): Promise<ProviderAccount> {
  const row = await findProviderAccount(q, id);
  if (!row || row.detached_at !== null) throw notFound('provider account', id);
  return row;
}

type WriteAppliers = {
  [K in OperatorWriteType]: (
    q: Queries,
    w: { type: K } & OperatorWrites[K][0],
  ) => Promise<OperatorWrites[K][1]>;
};

const appliers: WriteAppliers = {
  async session_start(q, w) {
    await insertOperatorSession(q, {
      id_hash: hex(w.id_hash),
      operator_id: w.operator_id,
      created_at: w.now,
      last_seen_at: w.now,
      client_ip: w.client_ip,
    });
    await audit(q, w.stamp, 'session.sign_in', w.operator_id);
    return null;
  },
  async session_end(q, w) {
    if (await deleteOperatorSession(q, hex(w.id_hash)))
      await audit(q, w.stamp, 'session.sign_out', w.operator_id);
    return null;
  },
  async session_touch(q, w) {
    await touchOperatorSession(q, hex(w.id_hash), w.now, w.seen);
    return null;
  },
  async token_touch(q, w) {
    await touchOperatorToken(q, w.token_id, w.now);
    return null;
  },
  async password_set(q, w) {
    if (!(await setOperatorPassword(q, w.operator_id, w.password_hash, w.now, w.must_change)))
      throw notFound('operator', w.operator_id);
    const sessionsEnded = await deleteOperatorSessions(
      q,
      w.operator_id,
      w.keep_session === null ? null : hex(w.keep_session),
    );
    const tokensRevoked = w.revoke_tokens ? await revokeOperatorTokens(q, w.operator_id, w.now) : 0;
    await audit(q, w.stamp, w.action, w.operator_id, {
      sessions_ended: sessionsEnded,
      tokens_revoked: tokensRevoked,
    });
    return {
      sessions_ended: sessionsEnded,
      tokens_revoked: tokensRevoked,
      tokens_active: await countActiveOperatorTokens(q, w.operator_id, w.now),
    };
  },
  async token_create(q, w) {
    await insertOperatorToken(q, { ...w.row, token_hash: hex(w.row.token_hash) });
    await audit(q, w.stamp, 'operator_token.create', w.row.id, {
      operator: w.row.operator_id,
      name: w.row.name,
    });
    return null;
  },
  async token_revoke(q, w) {
    if (!(await getOperatorToken(q, w.id))) throw notFound('token', w.id);
    if (await revokeOperatorToken(q, w.id, w.now))
      await audit(q, w.stamp, 'operator_token.revoke', w.id);
    return null;
  },
  async operator_create(q, w) {
    if (await findOperatorByEmail(q, w.row.email))
      throw conflict(`an operator with email ${w.row.email} already exists`);
    await insertOperator(q, w.row);
    await setOperatorProjects(q, w.row.id, w.projects);
    await audit(q, w.stamp, 'operator.create', w.row.id, {
      email: w.row.email,
      role: w.row.role,
      projects: w.projects,
    });
    return null;
  },
  async operator_remove(q, w) {
    const row = await requireOperatorRow(q, w.id);
    await keepAnOwner(q, row);
    await deleteOperator(q, w.id);
    await audit(q, w.stamp, 'operator.remove', w.id, { email: row.email });
    return null;
  },
  async operator_update(q, w) {
    const row = await requireOperatorRow(q, w.id);
    const role = w.role ?? row.role;
    if (role !== row.role && role === 'member') await keepAnOwner(q, row);
    const projects = w.projects ?? (role === 'owner' ? [] : await operatorProjectIds(q, w.id));
    await setOperatorRole(q, w.id, role);
    await setOperatorProjects(q, w.id, projects);
    await audit(q, w.stamp, 'operator.update', w.id, { role, projects });
    return null;
  },
  async project_create(q, w) {
    await insertProject(q, w.row);
    await audit(q, w.stamp, 'project.create', w.row.id, { name: w.row.name, plan: w.row.plan });
    return null;
  },
  async project_change(q, w) {
    const c = w.change;
    if ('strategy' in c) await setProjectStrategy(q, w.id, c.strategy);
    else if ('plan' in c) await setProjectPlan(q, w.id, c.plan);
    else await markProjectDeleted(q, w.id, c.deleted_at);
    const [action, details] =
      'strategy' in c
        ? ['project.strategy', c]
        : 'plan' in c
          ? ['project.plan', c]
          : ['project.delete', undefined];
    await audit(q, w.stamp, action, w.id, details);
    return null;
  },
  /** Resuming releases the ones held only by the pause. */
  async project_pause(q, w) {
    if (!(await getProject(q, w.id))) throw notFound('project', w.id);
    await setProjectPaused(q, w.id, w.paused);
    await audit(q, w.stamp, w.paused ? 'project.pause' : 'project.resume', w.id);
    let released = 0;
    if (w.paused) return { released };
    for (const m of await projectHeldMessages(q, w.id)) {
      if (m.status === 'captured') {
        // A sandbox message stays captured; it is simply no longer held by the pause.
        await transitionMessage(
          q,
          m.id,
          'project_resume',
          { status: 'captured', hold_reason: null, next_attempt_at: null },
          w.now,
        );
        continue;
      }
      const scheduled = m.scheduled_at !== null && m.scheduled_at > w.now;
      if (
        await transitionMessage(
          q,
          m.id,
          'project_resume',
          {
            status: scheduled ? 'scheduled' : 'queued',
            hold_reason: null,
            next_attempt_at: scheduled ? m.scheduled_at : w.now,
          },
          w.now,
        )
      )
        released++;
    }
    return { released };
  },
  async key_create(q, w) {
    const made = await createApiKey(q, w.project_id, w.mode, w.now, w.expires_at, w.name);
    await audit(q, w.stamp, 'key.create', made.row.id, {
      project: w.project_id,
      mode: w.mode,
      name: w.name,
    });
    return { id: made.row.id, key: made.key };
  },
  async key_revoke(q, w) {
    if (!(await getApiKey(q, w.id))) throw notFound('key', w.id);
    if (await revokeApiKey(q, w.id, w.now)) await audit(q, w.stamp, 'key.revoke', w.id);
    return null;
  },
  async key_rotate(q, w) {
    const old = await getApiKey(q, w.id);
    if (!old) throw notFound('key', w.id);
    const state = credentialState(old, w.now);
    if (state !== 'active')
      throw conflict(`key ${w.id} is ${state}; only an active key can be rotated`);
    if (!(await getProject(q, old.project_id))) throw notFound('project', old.project_id);
    // The new key keeps the old one's name: it does the same job.
    const made = await createApiKey(q, old.project_id, old.mode, w.now, null, old.name ?? '');
    await shortenApiKeyExpiry(q, w.id, w.now + w.grace_seconds * 1000);
    await audit(q, w.stamp, 'key.rotate', w.id, {
      new_key: made.row.id,
      grace_seconds: w.grace_seconds,
    });
    return { id: made.row.id, key: made.key };
  },
  async provider_attach(q, w) {
    await insertProviderAccount(q, w.row);
    await audit(q, w.stamp, 'provider.attach', w.row.id, {
      project: w.row.project_id,
      slug: w.row.slug,
    });
    return null;
  },
  async provider_detach(q, w) {
    if (!(await detachProviderAccount(q, w.id, w.now))) throw notFound('provider account', w.id);
    await audit(q, w.stamp, 'provider.detach', w.id);
    return null;
  },
  async provider_update(q, w) {
    const row = await requireAttachedAccount(q, w.id);
    const next = {
      priority: w.priority ?? row.priority,
      free_quota: w.free_quota === undefined ? row.free_quota : w.free_quota,
    };
    await setProviderAccountLimits(q, w.id, next.priority, next.free_quota);
    const settings = w.settings ?? {};
    const secrets = w.secrets ?? {};
    if (Object.keys(settings).length > 0 || Object.keys(secrets).length > 0) {
      await setProviderAccountConfig(
        q,
        w.id,
        { ...row.settings, ...settings },
        { ...row.secrets, ...secrets },
      );
    }
    // The secrets' names, never their values.
    await audit(q, w.stamp, 'provider.update', w.id, {
      ...next,
      ...settings,
      ...(Object.keys(secrets).length > 0 ? { secrets_replaced: Object.keys(secrets).sort() } : {}),
    });
    return null;
  },
  async suppression_add(q, w) {
    await addSuppression(q, w.row);
    await audit(q, w.stamp, 'suppression.add', w.row.project_id, {
      email: w.row.email,
      reason: w.row.reason,
    });
    return null;
  },
  async suppression_remove(q, w) {
    if (!(await removeSuppression(q, w.project_id, w.email)))
      throw notFound('suppression', w.email);
    await audit(q, w.stamp, 'suppression.remove', w.project_id, { email: w.email });
    return null;
  },
  async dkim_add(q, w) {
    await storeDkimKey(q, w.row);
    await audit(q, w.stamp, 'dkim.add', w.row.id, {
      project: w.row.project_id,
      domain: w.row.domain,
      selector: w.row.selector,
    });
    return null;
  },
  async dkim_remove(q, w) {
    if (!(await removeDkimKey(q, w.id, w.now))) throw notFound('DKIM key', w.id);
    await audit(q, w.stamp, 'dkim.remove', w.id);
    return null;
  },
  async webhook_add(q, w) {
    // Through the outbox: where nodes share it, the registration is ordered against their fan-outs.
    const row = await backendOf(q).webhookOutbox.addEndpoint(q, w.row);
    await audit(q, w.stamp, 'webhook.add', row.id, { project: row.project_id, url: row.url });
    return null;
  },
  async webhook_remove(q, w) {
    const removed = await backendOf(q).webhookOutbox.removeEndpoint(q, w.id, w.now);
    if (!removed.removed) throw notFound('webhook', w.id);
    await audit(q, w.stamp, 'webhook.remove', w.id);
    return { cancelled: removed.cancelled };
  },
  async webhook_rotate(q, w) {
    if (!(await rotateWebhookSecret(q, w.id, w.secret, w.previous_expires_at)))
      throw notFound('webhook', w.id);
    await audit(q, w.stamp, 'webhook.rotate_secret', w.id);
    return null;
  },
  async webhook_enable(q, w) {
    const resumed = await enableWebhookEndpoint(q, w.id, w.now);
    if (resumed === null) throw notFound('webhook', w.id);
    await audit(q, w.stamp, 'webhook.enable', w.id);
    return { resumed };
  },
  /** Never retried. */
  async webhook_test(q, w) {
    const ok = w.attempt.ok === 1;
    await insertWebhookDelivery(q, {
      id: w.delivery_id,
      endpoint_id: w.endpoint_id,
      event_seq: null,
      type: w.event_type,
      status: ok ? 'delivered' : 'failed',
      attempts: 1,
      next_attempt_at: null,
      created_at: w.created_at,
      last_attempt_at: w.at,
      last_status: w.attempt.status_code,
      last_error: w.attempt.error,
      completed_at: w.at,
      body: w.body,
    });
    await insertWebhookAttempt(q, {
      ...w.attempt,
      delivery_id: w.delivery_id,
      endpoint_id: w.endpoint_id,
      type: w.event_type,
      attempt: 1,
      attempted_at: w.created_at,
    });
    await audit(q, w.stamp, 'webhook.test', w.endpoint_id, {
      delivery: w.delivery_id,
      delivered: ok,
    });
    return null;
  },
  async webhook_redeliver(q, w) {
    const ok = w.attempt.ok === 1;
    const attempt = await recordRedelivery(q, w.delivery_id, {
      at: w.at,
      ok,
      status: w.attempt.status_code,
      error: w.attempt.error,
    });
    if (attempt === null)
      throw conflict(
        `delivery ${w.delivery_id} is waiting for its next attempt; it cannot be redelivered by hand until it is delivered or has failed`,
      );
    await insertWebhookAttempt(q, {
      ...w.attempt,
      delivery_id: w.delivery_id,
      endpoint_id: w.endpoint_id,
      type: w.event_type,
      attempt,
      attempted_at: w.started_at,
    });
    await audit(q, w.stamp, 'webhook.redeliver', w.endpoint_id, {
      delivery: w.delivery_id,
      attempt,
      delivered: ok,
    });
    return { attempt };
  },
  async message_one(q, w) {
    const m = await getMessage(q, w.id);
    if (!m) throw notFound('message', w.id);
    if (!ACTION_FROM[w.action].includes(m.status))
      throw conflict(`message ${w.id} is ${m.status}; ${ACTION_WORDS[w.action]}`);
    if (
      w.action === 'release' &&
      (await getProject(q, m.project_id))?.paused === 1 &&
      m.hold_reason === 'project'
    ) {
      throw conflict(`message ${w.id} is held by its paused project; resume the project`);
    }
    if ((await applyMessageAction(q, w.action, { ids: [w.id] }, w.now)).length > 0)
      await audit(q, w.stamp, `message.${w.action}`, w.id);
    return null;
  },
  async message_delete(q, w) {
    const m = await getMessage(q, w.id);
    if (!m) throw notFound('message', w.id);
    if (!removableFrom('delete').includes(m.status))
      throw conflict(
        `message ${w.id} is ${m.status}; only a captured (sandbox) message can be deleted`,
      );
    const spoolPath = await deleteCapturedMessage(q, w.id);
    await audit(q, w.stamp, 'message.delete', w.id);
    return { spool_path: spoolPath };
  },
  async message_link(q, w) {
    if (!(await getMessage(q, w.id))) throw notFound('message', w.id);
    await insertViewerLink(q, w.link);
    await audit(q, w.stamp, 'message.link', w.id, {
      link: w.link.id,
      expires_at: new Date(w.link.expires_at).toISOString(),
    });
    return null;
  },
  async message_link_revoke(q, w) {
    if (!(await revokeViewerLink(q, w.id, w.link_id, w.now)))
      throw notFound('viewer link', w.link_id);
    await audit(q, w.stamp, 'message.link_revoke', w.id, { link: w.link_id });
    return null;
  },
};

/** A WriteRefused rolls back what it began and is thrown on. */
export function applyOperatorWrite(q: Queries, work: OperatorWrite): Promise<unknown> {
  const apply = appliers[work.type] as (q: Queries, w: OperatorWrite) => Promise<unknown>;
  return apply(q, work);
}

/** Their loss in a power failure costs nothing an operator was told. */
export const OPERATOR_WRITES_NOT_DURABLE: ReadonlySet<OperatorWriteType> = new Set([
  'session_touch',
  'token_touch',
]);
