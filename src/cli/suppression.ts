import { suppress, suppressionCsv, suppressionList, unsuppress } from '../operator/suppressions.js';
import { type CommandGroup, str, TextOutput } from './command.js';

export const suppressionCommands: CommandGroup = {
  add: {
    usage: 'suppression add --project ID --email E [--reason R]',
    options: { project: { type: 'string' }, email: { type: 'string' }, reason: { type: 'string' } },
    required: ['project', 'email'],
    run: (ctx, v) => suppress(ctx, str(v.project)!, str(v.email)!, str(v.reason)),
  },
  remove: {
    usage: 'suppression remove --project ID --email E',
    options: { project: { type: 'string' }, email: { type: 'string' } },
    required: ['project', 'email'],
    run: (ctx, v) => unsuppress(ctx, str(v.project)!, str(v.email)!),
  },
  list: {
    usage: 'suppression list --project ID',
    options: { project: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => suppressionList(ctx, str(v.project)!),
  },
  export: {
    usage: 'suppression export --project ID',
    options: { project: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => new TextOutput(suppressionCsv(ctx, str(v.project)!)),
  },
};
