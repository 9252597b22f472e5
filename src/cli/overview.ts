import { ActivityTail } from '../operator/activity.js';
import { overview, StorageFigures } from '../operator/overview.js';
import { requireProject } from '../operator/projects.js';
import { type CommandGroup, str } from './command.js';

export const overviewCommands: CommandGroup = {
  show: {
    usage: 'overview show [--project ID]',
    options: { project: { type: 'string' } },
    // Read from the index now: the last 24 hours of events and last hour of attempts (throttled-until is known only to the server).
    run: async (ctx, v) => {
      const project = str(v.project);
      if (project !== undefined) await requireProject(ctx, project);
      return overview(
        ctx,
        {
          activity: new ActivityTail(ctx.store, ctx.clock),
          storage: new StorageFigures(ctx.store, ctx.config.state_dir),
        },
        project === undefined ? null : [project],
        true,
      );
    },
  },
};
