import { getApiKey } from '../store/apiKeys.js';
import { getDkimKey } from '../store/dkimKeys.js';
import { getMessage } from '../store/messages.js';
import { findProviderAccount } from '../store/providerAccounts.js';
import { getWebhookEndpoint } from '../store/webhookEndpoints.js';
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
  if (p.operator.role !== 'owner')
    throw new OperatorError('forbidden', 'only an owner may do this');
}

export const canSeeProject = (p: Principal, projectId: string): boolean =>
  p.projects === null || p.projects.includes(projectId);

export async function requireVisibleProject(
  ctx: OperatorContext,
  p: Principal,
  projectId: string,
): Promise<void> {
  if (!canSeeProject(p, projectId)) throw notFound('project', projectId);
  await requireProject(ctx, projectId);
}

export type Owned = 'message' | 'key' | 'webhook' | 'dkim' | 'provider';

const owners: Record<Owned, (ctx: OperatorContext, id: string) => Promise<string | undefined>> = {
  message: async (ctx, id) => (await getMessage(ctx.store, id))?.project_id,
  key: async (ctx, id) => (await getApiKey(ctx.store, id))?.project_id,
  webhook: async (ctx, id) => (await getWebhookEndpoint(ctx.store, id))?.project_id,
  dkim: async (ctx, id) => (await getDkimKey(ctx.store, id))?.project_id,
  provider: async (ctx, id) => {
    const account = await findProviderAccount(ctx.store, id);
    return account?.detached_at === null ? account.project_id : undefined;
  },
};

const names: Record<Owned, string> = {
  message: 'message',
  key: 'key',
  webhook: 'webhook',
  dkim: 'DKIM key',
  provider: 'provider account',
};

/** The project of a message, key, webhook, DKIM key or provider account the principal may see; else not found. */
export async function requireVisible(
  ctx: OperatorContext,
  p: Principal,
  kind: Owned,
  id: string,
): Promise<string> {
  const projectId = await owners[kind](ctx, id);
  if (projectId === undefined || !canSeeProject(p, projectId)) throw notFound(names[kind], id);
  return projectId;
}
