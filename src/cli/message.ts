import { MESSAGE_STATUSES, type MessageStatus } from '../contract/messageStates.js';
import { bulkMessageAction } from '../operator/bulk.js';
import type { BulkTarget } from '../operator/bulkTarget.js';
import { OperatorError } from '../operator/errors.js';
import {
  configuredViewerBase,
  durationSeconds,
  messageLink,
  messageLinks,
  revokeMessageLink,
} from '../operator/messageLinks.js';
import {
  cancelMessage,
  deleteMessage,
  messageList,
  messageShow,
  openMessageMime,
  releaseMessage,
  retryMessage,
} from '../operator/messages.js';
import { viewerSecret } from '../policy/viewerKey.js';
import type { MessageAction } from '../store/messageActions.js';
import { type Command, type CommandGroup, commandLogger, RawOutput, str, strs } from './command.js';

const BULK_ACTIONS: readonly MessageAction[] = ['release', 'cancel', 'retry'];

function statusList(v: string | undefined): MessageStatus[] | undefined {
  if (v === undefined) return undefined;
  const list = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = list.filter((s) => !MESSAGE_STATUSES.includes(s as MessageStatus));
  if (unknown.length > 0)
    throw new OperatorError(
      'invalid_argument',
      `--status must be among: ${MESSAGE_STATUSES.join(', ')}`,
      'status',
    );
  return list as MessageStatus[];
}

/** A bulk filter from its parts: projects (none: every project), environment, statuses (comma-separated). */
function filterTarget(
  projects: string[],
  environment: string | undefined,
  status: string | undefined,
): BulkTarget {
  if (environment !== undefined && environment !== 'production' && environment !== 'sandbox')
    throw new OperatorError(
      'invalid_argument',
      '--environment must be production or sandbox',
      'environment',
    );
  return {
    filter: {
      projectIds: projects.length === 0 ? null : projects,
      environment: environment as 'production' | 'sandbox' | undefined,
      statuses: statusList(status),
    },
  };
}

/** `--filter KEY=VALUE` (repeatable): project (repeatable), environment, status (S,…). */
function parsedFilter(parts: string[]): BulkTarget {
  const projects: string[] = [];
  const single: Record<'environment' | 'status', string | undefined> = {
    environment: undefined,
    status: undefined,
  };
  for (const part of parts) {
    const m = /^(project|environment|status)=(.+)$/.exec(part);
    if (!m)
      throw new OperatorError(
        'invalid_argument',
        `--filter ${part}: expected project=ID, environment=production|sandbox or status=S,…`,
        'filter',
      );
    if (m[1] === 'project') projects.push(m[2]);
    else if (single[m[1] as 'environment' | 'status'] !== undefined)
      throw new OperatorError('invalid_argument', `--filter ${m[1]} given twice`, 'filter');
    else single[m[1] as 'environment' | 'status'] = m[2];
  }
  return filterTarget(projects, single.environment, single.status);
}

/** `message ACTION ID`, or its bulk form `message ACTION --filter …` (the console's bulk rule, operator/bulk.ts). */
function singleOrBulk(
  action: MessageAction,
  one: (ctx: Parameters<Command['run']>[0], id: string) => unknown,
): Command {
  return {
    usage: `message ${action} ID | ${action} --filter KEY=VALUE [--filter …]`,
    positionals: ['ID'],
    positionalsUnless: 'filter',
    options: { filter: { type: 'string', multiple: true } },
    run: async (ctx, v, [id]) =>
      v.filter !== undefined
        ? (await bulkMessageAction(ctx, action, parsedFilter(strs(v.filter)), null)).result
        : one(ctx, id),
  };
}

export const messageCommands: CommandGroup = {
  list: {
    usage: 'message list --project ID [--status S] [--limit N]',
    options: { project: { type: 'string' }, status: { type: 'string' }, limit: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => {
      const limit = str(v.limit);
      if (limit !== undefined && !/^\d+$/.test(limit))
        throw new OperatorError('invalid_argument', '--limit must be an integer');
      return messageList(
        ctx,
        str(v.project)!,
        str(v.status),
        limit === undefined ? 50 : Number(limit),
      );
    },
  },
  show: {
    usage: 'message show ID [--raw]',
    positionals: ['ID'],
    options: { raw: { type: 'boolean' } },
    run: async (ctx, v, [id]) =>
      v.raw ? new RawOutput(await openMessageMime(ctx, id)) : messageShow(ctx, id),
  },
  release: singleOrBulk('release', releaseMessage),
  cancel: singleOrBulk('cancel', cancelMessage),
  retry: singleOrBulk('retry', retryMessage),
  link: {
    usage: 'message link ID [--expires 7d]',
    positionals: ['ID'],
    options: { expires: { type: 'string' } },
    run: async (ctx, v, [id]) => {
      const expires = str(v.expires);
      const seconds = expires === undefined ? undefined : durationSeconds(expires);
      if (seconds === null)
        throw new OperatorError(
          'invalid_argument',
          '--expires must be a duration such as 90m, 12h, 7d or 2w',
          'expires',
        );
      const base = configuredViewerBase(ctx.config);
      if (base === null)
        throw new OperatorError(
          'invalid_argument',
          'no HTTP listener to link to: set viewer.base_url',
          'viewer.base_url',
        );
      return messageLink(
        ctx,
        await viewerSecret(ctx.store, ctx.config.state_dir, commandLogger(), ctx.clock),
        base,
        id,
        seconds,
      );
    },
  },
  links: {
    usage: 'message links ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => messageLinks(ctx, id),
  },
  'revoke-link': {
    usage: 'message revoke-link ID LINK_ID',
    positionals: ['ID', 'LINK_ID'],
    run: (ctx, _v, [id, link]) => revokeMessageLink(ctx, id, link),
  },
  delete: {
    usage: 'message delete ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => deleteMessage(ctx, id),
  },
  bulk: {
    usage:
      'message bulk --action release|cancel|retry (--ids ID,… | [--project ID] [--environment E] [--status S,…])',
    options: {
      action: { type: 'string' },
      ids: { type: 'string' },
      project: { type: 'string' },
      environment: { type: 'string' },
      status: { type: 'string' },
    },
    required: ['action'],
    run: (ctx, v) => {
      const action = str(v.action) as MessageAction;
      if (!BULK_ACTIONS.includes(action))
        throw new OperatorError(
          'invalid_argument',
          '--action must be release, cancel or retry',
          'action',
        );
      const ids = str(v.ids);
      const project = str(v.project);
      const target: BulkTarget =
        ids !== undefined
          ? {
              ids: ids
                .split(',')
                .map((s) => s.trim())
                .filter(Boolean),
            }
          : filterTarget(project === undefined ? [] : [project], str(v.environment), str(v.status));
      return bulkMessageAction(ctx, action, target, null).then((outcome) => outcome.result);
    },
  },
};
