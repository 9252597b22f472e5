import { cancelMessage, messageList, messageRawPath, messageShow, releaseMessage } from '../operator/messages.js';
import { OperatorError } from '../operator/errors.js';
import { str, type CommandGroup } from './command.js';

/** Returned by `message show --raw`: the CLI streams the file instead of printing JSON. */
export class RawFile {
  constructor(readonly path: string) {}
}

export const messageCommands: CommandGroup = {
  list: {
    usage: 'message list --project ID [--status S] [--limit N]',
    options: { project: { type: 'string' }, status: { type: 'string' }, limit: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => {
      const limit = str(v.limit);
      if (limit !== undefined && !/^\d+$/.test(limit)) throw new OperatorError('invalid_argument', '--limit must be an integer');
      return messageList(ctx, str(v.project)!, str(v.status), limit === undefined ? 50 : Number(limit));
    },
  },
  show: {
    usage: 'message show ID [--raw]',
    positionals: ['ID'],
    options: { raw: { type: 'boolean' } },
    run: (ctx, v, [id]) => (v.raw ? new RawFile(messageRawPath(ctx, id)) : messageShow(ctx, id)),
  },
  release: { usage: 'message release ID', positionals: ['ID'], run: (ctx, _v, [id]) => releaseMessage(ctx, id) },
  cancel: { usage: 'message cancel ID', positionals: ['ID'], run: (ctx, _v, [id]) => cancelMessage(ctx, id) },
};
