import type { ProviderAccount } from '../contract/providerAccount.js';
import { createApiKey, credentialState, type KeyMode } from '../policy/apiKeys.js';
import { getApiKey, revokeApiKey, shortenApiKeyExpiry } from '../store/apiKeys.js';
import { insertAudit, type AuditRow } from '../store/audit.js';
import type { Db } from '../store/db.js';
import { removeDkimKey, storeDkimKey, type DkimKeyRow } from '../store/dkimKeys.js';
import { ACTION_FROM, applyMessageAction, deleteCapturedMessage, type MessageAction } from '../store/messageActions.js';
import { getMessage, projectHeldMessages, transitionMessage } from '../store/messages.js';
import {
  deleteOperatorSession, deleteOperatorSessions, getOperatorToken, insertOperatorSession, insertOperatorToken, revokeOperatorToken, touchOperatorSession, touchOperatorToken,
} from '../store/operatorSessions.js';
import {
  countOwners, deleteOperator, findOperatorByEmail, getOperator, insertOperator, operatorProjectIds, setOperatorPassword, setOperatorProjects, setOperatorRole,
  type OperatorRole, type OperatorRow,
} from '../store/operators.js';
import { getProject, insertProject, markProjectDeleted, setProjectPaused, setProjectPlan, setProjectStrategy } from '../store/projects.js';
import { detachProviderAccount, findProviderAccount, insertProviderAccount, setProviderAccountLimits } from '../store/providerAccounts.js';
import { addSuppression, removeSuppression, type SuppressionRow } from '../store/suppressions.js';
import { insertWebhookAttempt, type WebhookAttemptRow } from '../store/webhookAttempts.js';
import { enableWebhookEndpoint, insertWebhookDelivery, insertWebhookEndpoint, removeWebhookEndpoint, rotateWebhookSecret } from '../store/webhooks.js';

/**
 * The operator layer's single writes (everything but a bulk action's chunks and the keys' last
 * use, operatorBookkeeping.ts), as plain data: each is the part of an operation that must be
 * one transaction — its checks against the index as it is now, the change, and its audit row.
 * The operator layer checks its arguments before and builds its answer after (src/operator/);
 * the writer thread (the server) or the CLI's own connection runs the transaction. Ids and
 * secrets a caller needs are chosen by the operator layer, or sent back in the result.
 */

/** Who, when and from where, for the audit row an operation writes with its change. */
export type AuditStamp = Pick<AuditRow, 'at' | 'actor' | 'actor_email' | 'client_ip'>;

/** Why a write changed nothing: the operator layer answers it as its OperatorError. */
export interface WriteRefusal {
  code: 'not_found' | 'conflict';
  message: string;
}

/** Thrown inside a write's transaction (rolled back); crosses the thread as a WriteRefusal. */
export class WriteRefused extends Error {
  constructor(readonly refusal: WriteRefusal) {
    super(refusal.message);
  }
}

const notFound = (what: string, id: string) => new WriteRefused({ code: 'not_found', message: `${what} ${id} not found` });
const conflict = (message: string) => new WriteRefused({ code: 'conflict', message });

function audit(db: Db, stamp: AuditStamp, action: string, target: string | null, details?: Record<string, unknown>): void {
  insertAudit(db, { ...stamp, action, target, details: details === undefined ? null : JSON.stringify(details) });
}

/** Session and token ids travel as hex: a Buffer crosses a MessagePort as a bare Uint8Array. */
const hex = (value: string) => Buffer.from(value, 'hex');

/** Each write's data and what it answers. */
export interface OperatorWrites {
  /* sessions and tokens */
  session_start: [{ id_hash: string; operator_id: string; now: number; client_ip: string | null; stamp: AuditStamp }, null];
  session_end: [{ id_hash: string; operator_id: string; stamp: AuditStamp }, null];
  session_expire: [{ id_hash: string }, null];
  session_touch: [{ id_hash: string; now: number }, null];
  token_touch: [{ token_id: string; now: number }, null];
  password_set: [{ operator_id: string; password_hash: string; now: number; keep_session: string | null; action: 'operator.change_password' | 'operator.reset_password'; stamp: AuditStamp }, null];
  token_create: [{ row: { id: string; operator_id: string; name: string; token_hash: string; hint: string; created_at: number; expires_at: number | null }; stamp: AuditStamp }, null];
  token_revoke: [{ id: string; now: number; stamp: AuditStamp }, null];
  /* operators */
  operator_create: [{ row: OperatorRow; projects: string[]; stamp: AuditStamp }, null];
  operator_remove: [{ id: string; stamp: AuditStamp }, null];
  operator_update: [{ id: string; role: OperatorRole | null; projects: string[] | null; stamp: AuditStamp }, null];
  /* projects */
  project_create: [{ row: { id: string; name: string; plan: string; created_at: number }; stamp: AuditStamp }, null];
  project_change: [{ id: string; change: { strategy: string } | { plan: string } | { deleted_at: number }; stamp: AuditStamp }, null];
  project_pause: [{ id: string; paused: boolean; now: number; stamp: AuditStamp }, { released: number }];
  /* API keys */
  key_create: [{ project_id: string; mode: KeyMode; now: number; expires_at: number | null; stamp: AuditStamp }, { id: string; key: string }];
  key_revoke: [{ id: string; now: number; stamp: AuditStamp }, null];
  key_rotate: [{ id: string; now: number; grace_seconds: number; stamp: AuditStamp }, { id: string; key: string }];
  /* providers, suppressions, DKIM */
  provider_attach: [{ row: Omit<ProviderAccount, 'detached_at'>; stamp: AuditStamp }, null];
  provider_detach: [{ id: string; now: number; stamp: AuditStamp }, null];
  provider_update: [{ id: string; priority: number | null; free_quota?: number | null; stamp: AuditStamp }, null];
  suppression_add: [{ row: SuppressionRow; stamp: AuditStamp }, null];
  suppression_remove: [{ project_id: string; email: string; stamp: AuditStamp }, null];
  dkim_add: [{ row: Omit<DkimKeyRow, 'removed_at'>; stamp: AuditStamp }, null];
  dkim_remove: [{ id: string; now: number; stamp: AuditStamp }, null];
  /* webhooks */
  webhook_add: [{ row: { id: string; project_id: string; url: string; event_types: string | null; secret: string; created_at: number }; stamp: AuditStamp }, null];
  webhook_remove: [{ id: string; now: number; stamp: AuditStamp }, { cancelled: number }];
  webhook_rotate: [{ id: string; secret: string; previous_expires_at: number | null; stamp: AuditStamp }, null];
  webhook_enable: [{ id: string; now: number; stamp: AuditStamp }, { resumed: number }];
  webhook_test: [{ delivery_id: string; endpoint_id: string; event_type: string; created_at: number; at: number; attempt: Omit<WebhookAttemptRow, 'seq' | 'delivery_id' | 'endpoint_id' | 'type' | 'attempt' | 'attempted_at'>; stamp: AuditStamp }, null];
  /* messages */
  message_one: [{ action: MessageAction; id: string; now: number; stamp: AuditStamp }, null];
  message_delete: [{ id: string; stamp: AuditStamp }, { spool_path: string | null }];
  /** A viewer link made: nothing changes but the audit log (the link itself is a credential, never recorded). */
  message_link: [{ id: string; expires_at: string; stamp: AuditStamp }, null];
}

export type OperatorWriteType = keyof OperatorWrites;
export type OperatorWrite = { [K in OperatorWriteType]: { type: K } & OperatorWrites[K][0] }[OperatorWriteType];

const ACTION_WORDS: Record<MessageAction, string> = {
  release: 'only paused or captured messages can be released',
  cancel: 'only queued, scheduled, paused or captured messages can be cancelled',
  retry: 'only a queued message (waiting for its next attempt) can be retried now',
};

function requireOperatorRow(db: Db, id: string): OperatorRow {
  const row = getOperator(db, id);
  if (!row) throw notFound('operator', id);
  return row;
}

/** There is always an owner left: someone must be able to manage the rest. */
function keepAnOwner(db: Db, row: OperatorRow): void {
  if (row.role === 'owner' && countOwners(db) <= 1) throw conflict(`operator ${row.id} is the last owner; make another operator an owner first`);
}

function requireAttachedAccount(db: Db, id: string): ProviderAccount {
  const row = findProviderAccount(db, id);
  if (!row || row.detached_at !== null) throw notFound('provider account', id);
  return row;
}

type Bodies = { [K in OperatorWriteType]: (db: Db, w: { type: K } & OperatorWrites[K][0]) => OperatorWrites[K][1] };

const bodies: Bodies = {
  session_start(db, w) {
    insertOperatorSession(db, { id_hash: hex(w.id_hash), operator_id: w.operator_id, created_at: w.now, last_seen_at: w.now, client_ip: w.client_ip });
    audit(db, w.stamp, 'session.sign_in', w.operator_id);
    return null;
  },
  session_end(db, w) {
    if (deleteOperatorSession(db, hex(w.id_hash))) audit(db, w.stamp, 'session.sign_out', w.operator_id);
    return null;
  },
  session_expire(db, w) {
    deleteOperatorSession(db, hex(w.id_hash));
    return null;
  },
  session_touch(db, w) {
    touchOperatorSession(db, hex(w.id_hash), w.now);
    return null;
  },
  token_touch(db, w) {
    touchOperatorToken(db, w.token_id, w.now);
    return null;
  },
  password_set(db, w) {
    if (!setOperatorPassword(db, w.operator_id, w.password_hash, w.now)) throw notFound('operator', w.operator_id);
    deleteOperatorSessions(db, w.operator_id, w.keep_session === null ? null : hex(w.keep_session));
    audit(db, w.stamp, w.action, w.operator_id);
    return null;
  },
  token_create(db, w) {
    insertOperatorToken(db, { ...w.row, token_hash: hex(w.row.token_hash) });
    audit(db, w.stamp, 'operator_token.create', w.row.id, { operator: w.row.operator_id, name: w.row.name });
    return null;
  },
  token_revoke(db, w) {
    if (!getOperatorToken(db, w.id)) throw notFound('token', w.id);
    if (revokeOperatorToken(db, w.id, w.now)) audit(db, w.stamp, 'operator_token.revoke', w.id);
    return null;
  },
  operator_create(db, w) {
    if (findOperatorByEmail(db, w.row.email)) throw conflict(`an operator with email ${w.row.email} already exists`);
    insertOperator(db, w.row);
    setOperatorProjects(db, w.row.id, w.projects);
    audit(db, w.stamp, 'operator.create', w.row.id, { email: w.row.email, role: w.row.role, projects: w.projects });
    return null;
  },
  operator_remove(db, w) {
    const row = requireOperatorRow(db, w.id);
    keepAnOwner(db, row);
    deleteOperator(db, w.id);
    audit(db, w.stamp, 'operator.remove', w.id, { email: row.email });
    return null;
  },
  operator_update(db, w) {
    const row = requireOperatorRow(db, w.id);
    const role = w.role ?? row.role;
    if (role !== row.role && role === 'member') keepAnOwner(db, row);
    const projects = w.projects ?? (role === 'owner' ? [] : operatorProjectIds(db, w.id));
    setOperatorRole(db, w.id, role);
    setOperatorProjects(db, w.id, projects);
    audit(db, w.stamp, 'operator.update', w.id, { role, projects });
    return null;
  },
  project_create(db, w) {
    insertProject(db, w.row);
    audit(db, w.stamp, 'project.create', w.row.id, { name: w.row.name, plan: w.row.plan });
    return null;
  },
  project_change(db, w) {
    const c = w.change;
    if ('strategy' in c) setProjectStrategy(db, w.id, c.strategy);
    else if ('plan' in c) setProjectPlan(db, w.id, c.plan);
    else markProjectDeleted(db, w.id, c.deleted_at);
    const [action, details] = 'strategy' in c ? ['project.strategy', c] : 'plan' in c ? ['project.plan', c] : ['project.delete', undefined];
    audit(db, w.stamp, action, w.id, details);
    return null;
  },
  /** Pausing holds new messages (status `paused`); resuming releases the ones held only by the pause. */
  project_pause(db, w) {
    if (!getProject(db, w.id)) throw notFound('project', w.id);
    setProjectPaused(db, w.id, w.paused);
    audit(db, w.stamp, w.paused ? 'project.pause' : 'project.resume', w.id);
    let released = 0;
    if (w.paused) return { released };
    for (const m of projectHeldMessages(db, w.id)) {
      if (m.status === 'captured') {
        // A sandbox message stays captured; it is simply no longer held by the pause.
        transitionMessage(db, m.id, ['captured'], { status: 'captured', hold_reason: null, next_attempt_at: null }, w.now);
        continue;
      }
      const scheduled = m.scheduled_at !== null && m.scheduled_at > w.now;
      if (transitionMessage(db, m.id, ['paused'], { status: scheduled ? 'scheduled' : 'queued', hold_reason: null, next_attempt_at: scheduled ? m.scheduled_at : w.now }, w.now)) released++;
    }
    return { released };
  },
  key_create(db, w) {
    const made = createApiKey(db, w.project_id, w.mode, w.now, w.expires_at);
    audit(db, w.stamp, 'key.create', made.row.id, { project: w.project_id, mode: w.mode });
    return { id: made.row.id, key: made.key };
  },
  key_revoke(db, w) {
    if (!getApiKey(db, w.id)) throw notFound('key', w.id);
    if (revokeApiKey(db, w.id, w.now)) audit(db, w.stamp, 'key.revoke', w.id);
    return null;
  },
  key_rotate(db, w) {
    const old = getApiKey(db, w.id);
    if (!old) throw notFound('key', w.id);
    const state = credentialState(old, w.now);
    if (state !== 'active') throw conflict(`key ${w.id} is ${state}; only an active key can be rotated`);
    if (!getProject(db, old.project_id)) throw notFound('project', old.project_id);
    const made = createApiKey(db, old.project_id, old.mode, w.now, null);
    shortenApiKeyExpiry(db, w.id, w.now + w.grace_seconds * 1000);
    audit(db, w.stamp, 'key.rotate', w.id, { new_key: made.row.id, grace_seconds: w.grace_seconds });
    return { id: made.row.id, key: made.key };
  },
  provider_attach(db, w) {
    insertProviderAccount(db, w.row);
    audit(db, w.stamp, 'provider.attach', w.row.id, { project: w.row.project_id, slug: w.row.slug });
    return null;
  },
  provider_detach(db, w) {
    if (!detachProviderAccount(db, w.id, w.now)) throw notFound('provider account', w.id);
    audit(db, w.stamp, 'provider.detach', w.id);
    return null;
  },
  provider_update(db, w) {
    const row = requireAttachedAccount(db, w.id);
    const next = { priority: w.priority ?? row.priority, free_quota: w.free_quota === undefined ? row.free_quota : w.free_quota };
    setProviderAccountLimits(db, w.id, next.priority, next.free_quota);
    audit(db, w.stamp, 'provider.update', w.id, next);
    return null;
  },
  suppression_add(db, w) {
    addSuppression(db, w.row);
    audit(db, w.stamp, 'suppression.add', w.row.project_id, { email: w.row.email, reason: w.row.reason });
    return null;
  },
  suppression_remove(db, w) {
    if (!removeSuppression(db, w.project_id, w.email)) throw notFound('suppression', w.email);
    audit(db, w.stamp, 'suppression.remove', w.project_id, { email: w.email });
    return null;
  },
  dkim_add(db, w) {
    storeDkimKey(db, w.row);
    audit(db, w.stamp, 'dkim.add', w.row.id, { project: w.row.project_id, domain: w.row.domain, selector: w.row.selector });
    return null;
  },
  dkim_remove(db, w) {
    if (!removeDkimKey(db, w.id, w.now)) throw notFound('DKIM key', w.id);
    audit(db, w.stamp, 'dkim.remove', w.id);
    return null;
  },
  webhook_add(db, w) {
    const row = insertWebhookEndpoint(db, w.row);
    audit(db, w.stamp, 'webhook.add', row.id, { project: row.project_id, url: row.url });
    return null;
  },
  webhook_remove(db, w) {
    const removed = removeWebhookEndpoint(db, w.id, w.now);
    if (!removed.removed) throw notFound('webhook', w.id);
    audit(db, w.stamp, 'webhook.remove', w.id);
    return { cancelled: removed.cancelled };
  },
  webhook_rotate(db, w) {
    if (!rotateWebhookSecret(db, w.id, w.secret, w.previous_expires_at)) throw notFound('webhook', w.id);
    audit(db, w.stamp, 'webhook.rotate_secret', w.id);
    return null;
  },
  webhook_enable(db, w) {
    const resumed = enableWebhookEndpoint(db, w.id, w.now);
    if (resumed === null) throw notFound('webhook', w.id);
    audit(db, w.stamp, 'webhook.enable', w.id);
    return { resumed };
  },
  /** A test delivery: recorded as one delivery of the endpoint with its one attempt, never retried. */
  webhook_test(db, w) {
    const ok = w.attempt.ok === 1;
    insertWebhookDelivery(db, {
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
    });
    insertWebhookAttempt(db, { ...w.attempt, delivery_id: w.delivery_id, endpoint_id: w.endpoint_id, type: w.event_type, attempt: 1, attempted_at: w.created_at });
    audit(db, w.stamp, 'webhook.test', w.endpoint_id, { delivery: w.delivery_id, delivered: ok });
    return null;
  },
  /** The rule of a single message action; bulk actions apply the same `applyMessageAction`. */
  message_one(db, w) {
    const m = getMessage(db, w.id);
    if (!m) throw notFound('message', w.id);
    if (!ACTION_FROM[w.action].includes(m.status)) throw conflict(`message ${w.id} is ${m.status}; ${ACTION_WORDS[w.action]}`);
    if (w.action === 'release' && getProject(db, m.project_id)?.paused === 1 && m.hold_reason === 'project') {
      throw conflict(`message ${w.id} is held by its paused project; resume the project`);
    }
    if (applyMessageAction(db, w.action, { ids: [w.id] }, w.now).length > 0) audit(db, w.stamp, `message.${w.action}`, w.id);
    return null;
  },
  message_delete(db, w) {
    const m = getMessage(db, w.id);
    if (!m) throw notFound('message', w.id);
    if (m.status !== 'captured') throw conflict(`message ${w.id} is ${m.status}; only a captured (sandbox) message can be deleted`);
    const spoolPath = deleteCapturedMessage(db, w.id);
    audit(db, w.stamp, 'message.delete', w.id);
    return { spool_path: spoolPath };
  },
  message_link(db, w) {
    audit(db, w.stamp, 'message.link', w.id, { expires_at: w.expires_at });
    return null;
  },
};

/** Runs one write; the caller wraps it in a transaction. A WriteRefused rolls back what it began and is thrown on. */
export function applyOperatorWrite(db: Db, work: OperatorWrite): unknown {
  const body = bodies[work.type] as (db: Db, w: OperatorWrite) => unknown;
  return body(db, work);
}

/** Writes whose loss in a power failure costs nothing an operator was told: last-seen times. */
export const OPERATOR_WRITES_NOT_DURABLE: ReadonlySet<OperatorWriteType> = new Set(['session_touch', 'token_touch', 'session_expire']);
