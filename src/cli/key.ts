import { createKey, listKeys, revokeKey } from '../operator/keys.js';
import { str, type CommandGroup } from './command.js';

export const keyCommands: CommandGroup = {
  create: {
    usage: 'key create --project ID --mode live|test [--expires ISO]',
    options: { project: { type: 'string' }, mode: { type: 'string' }, expires: { type: 'string' } },
    required: ['project', 'mode'],
    run: (ctx, v) => createKey(ctx, str(v.project)!, str(v.mode)!, str(v.expires)),
  },
  revoke: { usage: 'key revoke KEY_ID', positionals: ['KEY_ID'], run: (ctx, _v, [id]) => revokeKey(ctx, id) },
  list: { usage: 'key list --project ID', options: { project: { type: 'string' } }, required: ['project'], run: (ctx, v) => listKeys(ctx, str(v.project)!) },
};
