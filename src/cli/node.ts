import { nodeList, nodeListTable } from '../operator/nodes.js';
import { type CommandGroup, TextOutput } from './command.js';

export const nodeCommands: CommandGroup = {
  // A table for people; one JSON object with --json.
  list: {
    usage: 'node list [--json]',
    run: async (ctx, v) =>
      v.json ? nodeList(ctx) : new TextOutput(nodeListTable(await nodeList(ctx))),
  },
};
