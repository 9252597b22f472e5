import { createKey, listKeys, revokeKey, rotateKey } from '../operator/keys.js';
import { type CommandGroup, int, str } from './command.js';

export const keyCommands: CommandGroup = {
  create: {
    usage: 'key create --project ID --mode live|test [--name NAME] [--expires ISO]',
    options: {
      project: { type: 'string' },
      mode: { type: 'string' },
      name: { type: 'string' },
      expires: { type: 'string' },
    },
    required: ['project', 'mode'],
    run: (ctx, v) => createKey(ctx, str(v.project)!, str(v.mode)!, str(v.expires), str(v.name)),
  },
  revoke: {
    usage: 'key revoke KEY_ID',
    positionals: ['KEY_ID'],
    run: (ctx, _v, [id]) => revokeKey(ctx, id),
  },
  rotate: {
    usage: 'key rotate KEY_ID [--grace-seconds N]',
    positionals: ['KEY_ID'],
    options: { 'grace-seconds': { type: 'string' } },
    run: (ctx, v, [id]) => rotateKey(ctx, id, int('grace-seconds', v['grace-seconds']) ?? 86_400),
  },
  list: {
    usage: 'key list --project ID',
    options: { project: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => listKeys(ctx, str(v.project)!),
  },
};
