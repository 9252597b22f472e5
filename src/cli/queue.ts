import { queueSummary, queueSummaryTable } from '../operator/queue.js';
import { type CommandGroup, TextOutput } from './command.js';

export const queueCommands: CommandGroup = {
  // A table for people (qshape's layout); one JSON object with --json.
  summary: {
    usage: 'queue summary [--json]',
    run: async (ctx, v) =>
      v.json ? queueSummary(ctx) : new TextOutput(queueSummaryTable(await queueSummary(ctx))),
  },
};
