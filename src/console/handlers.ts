/**
 * What each console API operation does, by operationId: access checks, then exactly the
 * operator layer's rule (the CLI's). Bodies and parameters arrive validated against the
 * document, typed by it (call.ts); answers are the operator layer's views.
 */
import { pipeline } from 'node:stream/promises';
import { ContractError } from '../contract/errors.js';
import { canSeeProject, requireVisible, requireVisibleProject } from '../operator/access.js';
import { auditLog } from '../operator/audit.js';
import { bulkDryRun, bulkMessageAction } from '../operator/bulk.js';
import type { OperatorContext } from '../operator/context.js';
import { addDkimKey, listDkim, removeDkim } from '../operator/dkim.js';
import { checkDomain, sendingDomains } from '../operator/domains.js';
import { createKey, listKeys, revokeKey, rotateKey } from '../operator/keys.js';
import type { KeyUseRecorder } from '../operator/keyUse.js';
import { messageContent, openAttachment } from '../operator/messageContent.js';
import {
  messageLink,
  messageLinks,
  previewPart,
  previewPartToken,
  revokeMessageLink,
} from '../operator/messageLinks.js';
import {
  deleteMessage,
  type MessageAction,
  type MessageFilter,
  messageAction,
  messageDetail,
  messageSearch,
  openMessageMime,
  requireMessage,
} from '../operator/messages.js';
import { nodeList } from '../operator/nodes.js';
import {
  createOperator,
  createOperatorToken,
  operatorList,
  operatorTokens,
  operatorView,
  removeOperator,
  requireOperatorToken,
  resetOperatorPassword,
  revokeOperatorTokenById,
  updateOperator,
} from '../operator/operators.js';
import { type OverviewSources, overview } from '../operator/overview.js';
import { checkPasswordRules } from '../operator/passwords.js';
import {
  changePlan,
  createProject,
  deleteProject,
  planList,
  projectList,
  setPaused,
  setStrategy,
  showProject,
} from '../operator/projects.js';
import {
  attachProvider,
  checkProvider,
  detachProvider,
  listProviders,
  updateProvider,
} from '../operator/providers.js';
import {
  changeOwnPassword,
  csrfTokenFor,
  type Principal,
  signIn,
  signOut,
} from '../operator/sessions.js';
import {
  suppress,
  suppressionCsv,
  suppressionSearch,
  unsuppress,
} from '../operator/suppressions.js';
import {
  redeliverWebhook,
  testWebhook,
  webhookAttempts,
  webhookDelivery,
} from '../operator/webhookDeliveries.js';
import {
  addWebhook,
  enableWebhook,
  listWebhooks,
  removeWebhook,
  rotateWebhookSecret,
  type TargetOptions,
} from '../operator/webhookEndpoints.js';
import {
  inlinePartsOf,
  safeContentType,
  sendBodyDocument,
  sendInlinePart,
} from '../viewer/bodyDocument.js';
import { type SignInThrottle, sessionCookieHeader } from './auth.js';
import type {
  AnonymousHandlers,
  Answer,
  AuthenticatedHandlers,
  AuthenticatedId,
  Call,
  Handler,
} from './call.js';
import type { LiveEvents } from './liveEvents.js';
import type * as Api from './types.gen.js';

export interface HandlerDeps {
  ctx: OperatorContext;
  secure: boolean;
  throttle: SignInThrottle;
  live: LiveEvents;
  overview: OverviewSources;
  keyUse: KeyUseRecorder | null;
  /** Test seams for webhook targets (DNS, CAs). */
  webhookTargets?: TargetOptions;
  /** The public viewer's signing key and where its links point (known once the HTTP listeners are bound). */
  viewerLinks: { secret: Buffer; base: () => string };
}

const ok = (body: unknown, status = 200): Answer => ({ status, body });

async function sessionView(
  p: Principal,
  sessionId: string | null,
  deps: HandlerDeps,
): Promise<Api.Session> {
  return {
    operator: await operatorView(deps.ctx, p.operator),
    via: p.via,
    csrf_token: sessionId === null ? null : csrfTokenFor(sessionId),
    idle_timeout_seconds: p.via === 'session' ? deps.ctx.config.console.session_idle_seconds : null,
  };
}

/** The console's message filter from the list's query (or a bulk body's `filter`: the same fields), within what the principal may see. */
async function messageFilter(
  ctx: OperatorContext,
  p: Principal,
  q: Api.Operations['listMessages']['query'],
): Promise<MessageFilter> {
  const { project } = q;
  if (project !== undefined) await requireVisibleProject(ctx, p, project);
  const time = (v: string | undefined) => (v === undefined ? undefined : Date.parse(v));
  return {
    projectIds: project !== undefined ? [project] : p.projects,
    environment: q.environment,
    statuses: q.status,
    from: q.from,
    to: q.to,
    subject: q.subject,
    category: q.category,
    tag: q.tag,
    createdAfter: time(q.created_after),
    createdBefore: time(q.created_before),
    id: q.id,
  };
}

/** `attachment; filename="…"` with an RFC 6266 UTF-8 form for names that are not plain ASCII. */
function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** The handlers of every operation but the document itself (the server answers it). */
export function consoleHandlers(deps: HandlerDeps): {
  authenticated: AuthenticatedHandlers;
  anonymous: Omit<AnonymousHandlers, 'getOpenApi'>;
} {
  const single =
    (action: MessageAction): Handler<'releaseMessage' | 'cancelMessage' | 'retryMessage'> =>
    async (c) => {
      const projectId = await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      const result = await messageAction(c.ctx, action, c.params.message_id);
      deps.live.announce([
        {
          id: result.id,
          status: result.status,
          project_id: projectId,
          environment: result.environment,
          type: `message.${action}`,
        },
      ]);
      return ok(result);
    };
  const inProject = async (
    c: Pick<Call<AuthenticatedId>, 'ctx' | 'principal'> & { params: { project_id: string } },
  ) => {
    await requireVisibleProject(c.ctx, c.principal, c.params.project_id);
    return c.params.project_id;
  };

  const anonymous: Omit<AnonymousHandlers, 'getOpenApi'> = {
    async signIn(c) {
      const { email, password } = c.body;
      // The attempt's place in the failed sign-in limits is taken before the password is
      // checked (attempts sent at once cannot all pass), and kept unless the password was right.
      const attempt = await deps.throttle.reserve(c.clientIp, email);
      const session = await signIn(c.ctx, email, password, c.clientIp);
      if (!session) throw new ContractError('invalid_credentials');
      await deps.throttle.succeeded(attempt);
      return {
        status: 201,
        body: await sessionView(session.principal, session.sessionId, deps),
        headers: { 'Set-Cookie': sessionCookieHeader(session.sessionId, deps.secure) },
      };
    },
    // The preview's sandboxed frame sends no cookie: the token signed for the message is the authority.
    async getMessageInlinePart(c) {
      const { attachment, stream } = await previewPart(
        c.ctx,
        deps.viewerLinks.secret,
        c.params.message_id,
        c.query.token,
        c.params.index,
      );
      await sendInlinePart(c.res, attachment, stream);
      return undefined;
    },
  };

  const authenticated: AuthenticatedHandlers = {
    /* session ---------------------------------------------------------------------------- */
    getSession: async (c) => ok(await sessionView(c.principal, c.sessionId, deps)),
    async signOut(c) {
      await signOut(c.ctx, c.principal);
      if (c.principal.sessionHash !== null) deps.live.end({ sessionHash: c.principal.sessionHash });
      const headers: Record<string, string> =
        c.principal.via === 'session'
          ? { 'Set-Cookie': sessionCookieHeader(null, deps.secure) }
          : {};
      return { status: 204, headers };
    },
    async changePassword(c) {
      const next = c.body.new_password;
      // A new password the rules refuse is answered before anything is checked: no guess, no place taken.
      checkPasswordRules(next, 'new_password');
      // The current password is a guess like a sign-in's: its place in the failed sign-in limits
      // (this operator's email, this address) is taken before the check, kept unless it was right.
      const attempt = await deps.throttle.reserve(
        c.clientIp,
        c.principal.operator.email,
        'current_password',
      );
      const changed = await changeOwnPassword(
        c.ctx,
        c.principal,
        c.body.current_password,
        next,
        c.body.revoke_tokens === true,
      );
      await deps.throttle.succeeded(attempt);
      // Their other sessions ended (and perhaps their tokens): so do those streams.
      await deps.live.recheck(c.principal.operator.id);
      return ok(changed);
    },
    listTokens: async (c) => ok(await operatorTokens(c.ctx, c.principal.operator.id)),
    createToken: async (c) =>
      ok(
        await createOperatorToken(c.ctx, c.principal.operator.id, c.body.name, c.body.expires_at),
        201,
      ),
    async revokeToken(c) {
      const token = await requireOperatorToken(c.ctx, c.params.token_id);
      if (token.operator_id !== c.principal.operator.id && c.principal.operator.role !== 'owner')
        throw new ContractError('not_found', { message: `token ${c.params.token_id} not found` });
      const revoked = await revokeOperatorTokenById(c.ctx, token.id);
      deps.live.end({ tokenId: token.id });
      return ok(revoked);
    },

    /* overview --------------------------------------------------------------------------- */
    async getOverview(c) {
      const { project } = c.query;
      if (project !== undefined) await requireVisibleProject(c.ctx, c.principal, project);
      const owner = c.principal.operator.role === 'owner';
      return ok(
        await overview(
          c.ctx,
          deps.overview,
          project !== undefined ? [project] : c.principal.projects,
          owner,
        ),
      );
    },

    // Owners and members alike: which processes serve the index is no project's secret.
    listNodes: async (c) => ok(await nodeList(c.ctx)),

    /* projects --------------------------------------------------------------------------- */
    listProjects: async (c) =>
      ok({
        projects: (await projectList(c.ctx)).projects.filter((p) =>
          canSeeProject(c.principal, p.id),
        ),
      }),
    createProject: async (c) => ok(await createProject(c.ctx, c.body.name, c.body.plan), 201),
    getProject: async (c) => ok(await showProject(c.ctx, await inProject(c))),
    deleteProject: async (c) => ok(await deleteProject(c.ctx, c.params.project_id)),
    pauseProject: async (c) => ok(await setPaused(c.ctx, c.params.project_id, true)),
    resumeProject: async (c) => ok(await setPaused(c.ctx, c.params.project_id, false)),
    changePlan: async (c) => ok(await changePlan(c.ctx, c.params.project_id, c.body.plan)),
    changeStrategy: async (c) => ok(await setStrategy(c.ctx, c.params.project_id, c.body.strategy)),

    /* keys ------------------------------------------------------------------------------- */
    async listKeys(c) {
      const projectId = await inProject(c);
      // Uses noted in memory are written first, so "last used" is current.
      await deps.keyUse?.flush();
      return ok(await listKeys(c.ctx, projectId));
    },
    createKey: async (c) =>
      ok(
        await createKey(c.ctx, await inProject(c), c.body.mode, c.body.expires_at, c.body.name),
        201,
      ),
    async revokeKey(c) {
      await requireVisible(c.ctx, c.principal, 'key', c.params.key_id);
      return ok(await revokeKey(c.ctx, c.params.key_id));
    },
    async rotateKey(c) {
      await requireVisible(c.ctx, c.principal, 'key', c.params.key_id);
      return ok(await rotateKey(c.ctx, c.params.key_id, c.body.grace_seconds ?? 86_400), 201);
    },

    /* providers (owners: the router checks) ---------------------------------------------- */
    listProviders: async (c) => ok(await listProviders(c.ctx, c.params.project_id)),
    // The operator layer takes the CLI's text for numbers.
    async attachProvider({ ctx, params, body: b }) {
      const options = {
        slug: b.slug,
        host: b.host,
        port: b.port?.toString(),
        user: b.user,
        pass: b.pass,
        tls: b.tls,
        endpoint: b.endpoint,
        region: b.region,
        domain: b.domain,
      };
      const secrets = {
        apiKey: b.api_key,
        webhookSecret: b.webhook_secret,
        webhookPublicKey: b.webhook_public_key,
      };
      return ok(
        await attachProvider(ctx, params.project_id, {
          ...options,
          ...secrets,
          label: b.label,
          freeQuota: b.free_quota?.toString(),
          priority: b.priority?.toString(),
        }),
        201,
      );
    },
    async updateProvider({ ctx, params, body: b }) {
      const secrets = {
        apiKey: b.api_key,
        webhookSecret: b.webhook_secret,
        webhookPublicKey: b.webhook_public_key,
      };
      const freeQuota = b.free_quota === null ? null : b.free_quota?.toString();
      return ok(
        await updateProvider(ctx, params.account_id, {
          priority: b.priority?.toString(),
          freeQuota,
          label: b.label,
          user: b.user,
          pass: b.pass,
          ...secrets,
        }),
      );
    },
    detachProvider: async (c) => ok(await detachProvider(c.ctx, c.params.account_id)),
    checkProvider: async (c) => ok(await checkProvider(c.ctx, c.params.account_id)),

    /* messages --------------------------------------------------------------------------- */
    listMessages: async (c) =>
      ok(
        await messageSearch(c.ctx, await messageFilter(c.ctx, c.principal, c.query), {
          limit: c.query.limit,
          cursor: c.query.cursor,
        }),
      ),
    async bulkMessages(c) {
      // The document takes exactly one of ids and filter.
      const { action, ids, filter } = c.body;
      const target =
        filter === undefined
          ? { ids: ids ?? [] }
          : { filter: await messageFilter(c.ctx, c.principal, filter) };
      if (c.body.dry_run === true)
        return ok(await bulkDryRun(c.ctx, action, target, c.principal.projects));
      const { result, changedIn } = await bulkMessageAction(
        c.ctx,
        action,
        target,
        c.principal.projects,
      );
      // Each stream hears of the messages it may see, and only of those.
      deps.live.refresh({ reason: 'bulk', action }, changedIn);
      return ok(result);
    },
    async getMessage(c) {
      await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      return ok(await messageDetail(c.ctx, c.params.message_id));
    },
    async getMessageContent(c) {
      await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      return ok(await messageContent(c.ctx, c.params.message_id));
    },
    async getMessageRaw(c) {
      await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      const mime = await openMessageMime(c.ctx, c.params.message_id);
      c.res.writeHead(200, {
        'Content-Type': 'message/rfc822',
        'Content-Disposition': contentDisposition(`${c.params.message_id}.eml`),
        'X-Content-Type-Options': 'nosniff',
      });
      await pipeline(mime, c.res);
      return undefined;
    },
    async getMessageAttachment(c) {
      await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      const { attachment, stream } = await openAttachment(
        c.ctx,
        c.params.message_id,
        c.params.index,
      );
      // Served as a download, never rendered in the console's origin.
      c.res.writeHead(200, {
        'Content-Type': safeContentType(attachment.content_type),
        'Content-Disposition': contentDisposition(
          attachment.filename ?? `attachment-${attachment.index}`,
        ),
        'X-Content-Type-Options': 'nosniff',
        'Content-Security-Policy': "default-src 'none'; sandbox",
      });
      await pipeline(stream, c.res);
      return undefined;
    },
    async getMessagePreview(c) {
      const id = c.params.message_id;
      await requireVisible(c.ctx, c.principal, 'message', id);
      const content = await messageContent(c.ctx, id);
      // Relative to …/messages/{id}/preview: …/messages/{id}/inline/{index}?token=….
      const token = previewPartToken(c.ctx, deps.viewerLinks.secret, id);
      sendBodyDocument(c.res, content, c.query.images === '1', {
        parts: inlinePartsOf(content.attachments),
        partUrl: (index) => `inline/${index}?token=${token}`,
      });
      return undefined;
    },
    async createMessageLink(c) {
      await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      return ok(
        await messageLink(
          c.ctx,
          deps.viewerLinks.secret,
          deps.viewerLinks.base(),
          c.params.message_id,
          c.body.expires_in_seconds,
        ),
        201,
      );
    },
    async listMessageLinks(c) {
      await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      return ok(await messageLinks(c.ctx, c.params.message_id));
    },
    async revokeMessageLink(c) {
      await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      return ok(await revokeMessageLink(c.ctx, c.params.message_id, c.params.link_id));
    },
    releaseMessage: single('release'),
    cancelMessage: single('cancel'),
    retryMessage: single('retry'),
    async deleteMessage(c) {
      const projectId = await requireVisible(c.ctx, c.principal, 'message', c.params.message_id);
      const { environment } = await requireMessage(c.ctx, c.params.message_id);
      const result = await deleteMessage(c.ctx, c.params.message_id);
      deps.live.announce([
        {
          id: result.id,
          status: 'deleted',
          project_id: projectId,
          environment,
          type: 'message.delete',
        },
      ]);
      return ok(result);
    },
    async streamEvents(c) {
      const project = c.query.project ?? null;
      if (project !== null) await requireVisibleProject(c.ctx, c.principal, project);
      await deps.live.open(c.res, c.principal, {
        project,
        environment: c.query.environment ?? null,
      });
      return undefined;
    },

    /* suppressions ----------------------------------------------------------------------- */
    listSuppressions: async (c) => ok(await suppressionSearch(c.ctx, await inProject(c), c.query)),
    addSuppression: async (c) =>
      ok(await suppress(c.ctx, await inProject(c), c.body.email, c.body.reason), 201),
    removeSuppression: async (c) => ok(await unsuppress(c.ctx, await inProject(c), c.params.email)),
    async exportSuppressions(c) {
      const chunks = suppressionCsv(c.ctx, await inProject(c));
      const first = await chunks.next();
      c.res.writeHead(200, {
        'Content-Type': 'text/csv; charset=utf-8',
        'Content-Disposition': contentDisposition(`suppressions-${c.params.project_id}.csv`),
      });
      if (!first.done) c.res.write(first.value);
      for await (const chunk of chunks) {
        // Waits for the client to take each chunk: memory stays flat for any list length.
        if (!c.res.write(chunk)) await new Promise((resolve) => c.res.once('drain', resolve));
      }
      c.res.end();
      return undefined;
    },

    /* DKIM ------------------------------------------------------------------------------- */
    listDkim: async (c) => ok(await listDkim(c.ctx, await inProject(c))),
    addDkim: async (c) =>
      ok(
        await addDkimKey(c.ctx, await inProject(c), {
          domain: c.body.domain,
          selector: c.body.selector,
          algorithm: c.body.algorithm,
          privateKeyPem: c.body.private_key,
        }),
        201,
      ),
    async removeDkim(c) {
      await requireVisible(c.ctx, c.principal, 'dkim', c.params.dkim_id);
      return ok(await removeDkim(c.ctx, c.params.dkim_id));
    },

    /* sending domains -------------------------------------------------------------------- */
    listDomains: async (c) => ok(await sendingDomains(c.ctx, await inProject(c))),
    checkDomain: async (c) =>
      ok(
        await checkDomain(c.ctx, c.params.domain, {
          projectId: await inProject(c),
          field: 'domain',
        }),
      ),

    /* webhooks --------------------------------------------------------------------------- */
    listWebhooks: async (c) => ok(await listWebhooks(c.ctx, await inProject(c))),
    addWebhook: async (c) =>
      ok(
        await addWebhook(
          c.ctx,
          await inProject(c),
          c.body.url,
          c.body.events?.join(','),
          deps.webhookTargets,
        ),
        201,
      ),
    async removeWebhook(c) {
      await requireVisible(c.ctx, c.principal, 'webhook', c.params.webhook_id);
      return ok(await removeWebhook(c.ctx, c.params.webhook_id));
    },
    async enableWebhook(c) {
      await requireVisible(c.ctx, c.principal, 'webhook', c.params.webhook_id);
      return ok(await enableWebhook(c.ctx, c.params.webhook_id));
    },
    async rotateWebhookSecret(c) {
      await requireVisible(c.ctx, c.principal, 'webhook', c.params.webhook_id);
      return ok(await rotateWebhookSecret(c.ctx, c.params.webhook_id));
    },
    async testWebhook(c) {
      await requireVisible(c.ctx, c.principal, 'webhook', c.params.webhook_id);
      return ok(await testWebhook(c.ctx, c.params.webhook_id, deps.webhookTargets));
    },
    async listWebhookAttempts(c) {
      await requireVisible(c.ctx, c.principal, 'webhook', c.params.webhook_id);
      return ok(await webhookAttempts(c.ctx, c.params.webhook_id, c.query));
    },
    async getWebhookDelivery(c) {
      await requireVisible(c.ctx, c.principal, 'webhook', c.params.webhook_id);
      return ok(await webhookDelivery(c.ctx, c.params.webhook_id, c.params.delivery_id));
    },
    async redeliverWebhook(c) {
      await requireVisible(c.ctx, c.principal, 'webhook', c.params.webhook_id);
      return ok(
        await redeliverWebhook(
          c.ctx,
          c.params.webhook_id,
          c.params.delivery_id,
          deps.webhookTargets,
        ),
      );
    },

    /* operators and the audit log (owners: the router checks) ---------------------------- */
    listOperators: async (c) => ok(await operatorList(c.ctx)),
    createOperator: async (c) => ok(await createOperator(c.ctx, c.body), 201),
    // An operator's streams follow their role and projects, and end with them (or their sessions).
    async updateOperator(c) {
      const updated = await updateOperator(c.ctx, c.params.operator_id, c.body);
      await deps.live.recheck(c.params.operator_id);
      return ok(updated);
    },
    async removeOperator(c) {
      const removed = await removeOperator(c.ctx, c.params.operator_id);
      deps.live.end({ operatorId: c.params.operator_id });
      return ok(removed);
    },
    async resetOperatorPassword(c) {
      const reset = await resetOperatorPassword(c.ctx, c.params.operator_id, undefined, {
        keepTokens: c.body.keep_tokens === true,
      });
      await deps.live.recheck(c.params.operator_id);
      return ok(reset);
    },
    listAudit: async ({ ctx, query: q }) =>
      ok(
        await auditLog(ctx, {
          limit: q.limit,
          cursor: q.cursor,
          actor: q.actor,
          actorEmail: q.actor_email,
          action: q.action,
        }),
      ),
    listPlans: async (c) => ok(planList(c.ctx)),
  };
  return { authenticated, anonymous };
}
