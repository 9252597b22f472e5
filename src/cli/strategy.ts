import { setStrategy } from '../operator/projects.js';
import { type CommandGroup, str } from './command.js';

export const strategyCommands: CommandGroup = {
  set: {
    usage: 'strategy set --project ID --strategy fallback|round-robin|random|free-first',
    options: { project: { type: 'string' }, strategy: { type: 'string' } },
    required: ['project', 'strategy'],
    run: (ctx, v) => setStrategy(ctx, str(v.project)!, str(v.strategy)!),
  },
};
