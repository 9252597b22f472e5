import {
  changePlan,
  createProject,
  deleteProject,
  projectList,
  setPaused,
  showProject,
} from '../operator/projects.js';
import { type CommandGroup, str } from './command.js';

export const projectCommands: CommandGroup = {
  create: {
    usage: 'project create --name NAME [--plan PLAN]',
    options: { name: { type: 'string' }, plan: { type: 'string' } },
    required: ['name'],
    run: (ctx, v) => createProject(ctx, str(v.name)!, str(v.plan)),
  },
  list: { usage: 'project list', run: (ctx) => projectList(ctx) },
  show: {
    usage: 'project show ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => showProject(ctx, id),
  },
  pause: {
    usage: 'project pause ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => setPaused(ctx, id, true),
  },
  resume: {
    usage: 'project resume ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => setPaused(ctx, id, false),
  },
  plan: {
    usage: 'project plan ID --plan P',
    positionals: ['ID'],
    options: { plan: { type: 'string' } },
    required: ['plan'],
    run: (ctx, v, [id]) => changePlan(ctx, id, str(v.plan)!),
  },
  delete: {
    usage: 'project delete ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => deleteProject(ctx, id),
  },
};
