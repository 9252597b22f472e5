import { addDkimKey, listDkim, removeDkim } from '../operator/dkim.js';
import { type CommandGroup, str } from './command.js';

export const dkimCommands: CommandGroup = {
  add: {
    usage:
      'dkim add --project ID --domain D --selector S [--private-key FILE] [--algorithm rsa|ed25519]',
    options: {
      project: { type: 'string' },
      domain: { type: 'string' },
      selector: { type: 'string' },
      'private-key': { type: 'string' },
      algorithm: { type: 'string' },
    },
    required: ['project', 'domain', 'selector'],
    run: (ctx, v) =>
      addDkimKey(ctx, str(v.project)!, {
        domain: str(v.domain)!,
        selector: str(v.selector)!,
        privateKeyFile: str(v['private-key']),
        algorithm: str(v.algorithm),
      }),
  },
  list: {
    usage: 'dkim list --project ID',
    options: { project: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => listDkim(ctx, str(v.project)!),
  },
  remove: {
    usage: 'dkim remove ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => removeDkim(ctx, id),
  },
};
