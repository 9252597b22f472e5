import { getApiKey } from '../store/apiKeys.js';
import { getDkimKey } from '../store/dkimKeys.js';
import { getMessage } from '../store/messages.js';
import { findProviderAccount } from '../store/providerAccounts.js';
import { getWebhookEndpoint } from '../store/webhooks.js';
import type { OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';
import type { Principal } from './sessions.js';

/**
 * Who may do what. Owners: everything. Members: only the projects they were given, and within
 * them messages, keys, webhooks, suppressions and DKIM; not providers, plans, projects'
 * settings, operators or the audit log. Anything of a project a member cannot see is answered
 * as if it did not exist.
 */
export function requireOwner(p: Principal): void {
  if (p.operator.role !== 'owner') throw new OperatorError('forbidden', 'only an owner may do this');
}

export const canSeeProject = (p: Principal, projectId: string): boolean => p.projects === null || p.projects.includes(projectId);

export function requireVisibleProject(ctx: OperatorContext, p: Principal, projectId: string): void {
  if (!canSeeProject(p, projectId)) throw notFound('project', projectId);
  requireProject(ctx, projectId);
}

export type Owned = 'message' | 'key' | 'webhook' | 'dkim' | 'provider';

const owners: Record<Owned, (ctx: OperatorContext, id: string) => string | undefined> = {
  message: (ctx, id) => getMessage(ctx.db, id)?.project_id,
  key: (ctx, id) => getApiKey(ctx.db, id)?.project_id,
  webhook: (ctx, id) => getWebhookEndpoint(ctx.db, id)?.project_id,
  dkim: (ctx, id) => getDkimKey(ctx.db, id)?.project_id,
  provider: (ctx, id) => {
    const account = findProviderAccount(ctx.db, id);
    return account?.detached_at === null ? account.project_id : undefined;
  },
};

const names: Record<Owned, string> = { message: 'message', key: 'key', webhook: 'webhook', dkim: 'DKIM key', provider: 'provider account' };

/** The project of a message, key, webhook, DKIM key or provider account the principal may see; else not found. */
export function requireVisible(ctx: OperatorContext, p: Principal, kind: Owned, id: string): string {
  const projectId = owners[kind](ctx, id);
  if (projectId === undefined || !canSeeProject(p, projectId)) throw notFound(names[kind], id);
  return projectId;
}
