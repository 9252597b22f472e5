import { newProjectId } from '../ids.js';
import { limitSettings, planFor } from '../policy/usageLimits.js';
import { getProject, listProjects, type ProjectRow } from '../store/projects.js';
import { categoryCount, dayPeriod, monthPeriod, senderDomains, usageFor } from '../store/usage.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { write } from './writer.js';

export interface ProjectView {
  id: string;
  name: string;
  plan: string;
  paused: boolean;
  strategy: string;
  created_at: string;
}

export const projectView = (p: ProjectRow): ProjectView => ({
  id: p.id,
  name: p.name,
  plan: p.plan,
  paused: p.paused === 1,
  strategy: p.strategy,
  created_at: iso(p.created_at)!,
});

function checkPlan(ctx: OperatorContext, plan: string): void {
  const names = Object.keys(ctx.config.plans);
  if (!names.includes(plan))
    throw new OperatorError(
      'invalid_argument',
      `unknown plan "${plan}" (one of: ${names.join(', ')})`,
      'plan',
    );
}

/** The configured plans with their limits, the default first named as such (the console's plan choice). */
export function planList(ctx: OperatorContext): {
  plans: { name: string; default: boolean; limits: ReturnType<typeof planFor> }[];
} {
  const settings = limitSettings(ctx.config);
  return {
    plans: Object.keys(ctx.config.plans).map((name) => ({
      name,
      default: name === ctx.config.default_plan,
      limits: planFor(settings, name),
    })),
  };
}

export async function projectList(ctx: OperatorContext): Promise<{ projects: ProjectView[] }> {
  return { projects: (await listProjects(ctx.store)).map(projectView) };
}

export async function requireProject(ctx: OperatorContext, id: string): Promise<ProjectRow> {
  const project = await getProject(ctx.store, id);
  if (!project) throw notFound('project', id);
  return project;
}

export async function createProject(
  ctx: OperatorContext,
  name: string,
  plan = ctx.config.default_plan,
): Promise<ProjectView> {
  if (name.trim() === '')
    throw new OperatorError('invalid_argument', 'project name must not be empty', 'name');
  checkPlan(ctx, plan);
  const id = newProjectId();
  await write(ctx, {
    type: 'project_create',
    row: { id, name, plan, created_at: ctx.clock.now() },
    stamp: auditStamp(ctx),
  });
  return projectView(await requireProject(ctx, id));
}

/** Pausing holds new messages (status `paused`); resuming releases the ones held only by the pause. */
export async function setPaused(
  ctx: OperatorContext,
  id: string,
  paused: boolean,
): Promise<ProjectView & { released?: number }> {
  const { released } = await write(ctx, {
    type: 'project_pause',
    id,
    paused,
    now: ctx.clock.now(),
    stamp: auditStamp(ctx),
  });
  const view = projectView(await requireProject(ctx, id));
  return paused ? view : { ...view, released };
}

const STRATEGIES = ['fallback', 'round-robin', 'random', 'free-first'];

/** The project's default routing strategy; a message's `routing.strategy` overrides it. */
export async function setStrategy(
  ctx: OperatorContext,
  id: string,
  strategy: string,
): Promise<ProjectView> {
  if (!STRATEGIES.includes(strategy))
    throw new OperatorError(
      'invalid_argument',
      `--strategy must be one of: ${STRATEGIES.join(', ')}`,
      'strategy',
    );
  await requireProject(ctx, id);
  await write(ctx, { type: 'project_change', id, change: { strategy }, stamp: auditStamp(ctx) });
  return projectView(await requireProject(ctx, id));
}

/** Takes effect on the next request: a 402 of the old plan is lifted at once. */
export async function changePlan(
  ctx: OperatorContext,
  id: string,
  plan: string,
): Promise<ProjectView> {
  checkPlan(ctx, plan);
  await requireProject(ctx, id);
  await write(ctx, { type: 'project_change', id, change: { plan }, stamp: auditStamp(ctx) });
  return projectView(await requireProject(ctx, id));
}

/** Soft delete: its keys stop working at once (invalid_api_key); its messages stay for audit. */
export async function deleteProject(
  ctx: OperatorContext,
  id: string,
): Promise<{ id: string; deleted: true }> {
  await requireProject(ctx, id);
  await write(ctx, {
    type: 'project_change',
    id,
    change: { deleted_at: ctx.clock.now() },
    stamp: auditStamp(ctx),
  });
  return { id, deleted: true };
}

/** A project with its plan's limits and this period's usage (UTC month and day). */
export async function showProject(ctx: OperatorContext, id: string) {
  const project = await requireProject(ctx, id);
  const now = ctx.clock.now();
  const plan = planFor(limitSettings(ctx.config), project.plan);
  const month = await usageFor(ctx.store, id, monthPeriod(now));
  const day = await usageFor(ctx.store, id, dayPeriod(now));
  return {
    ...projectView(project),
    limits: plan,
    usage: {
      month: {
        period: monthPeriod(now).slice(2),
        messages: month.messages,
        bytes: month.bytes,
        overage_messages: plan.overage ? Math.max(0, month.messages - plan.monthly_messages) : 0,
      },
      day: { period: dayPeriod(now).slice(2), messages: day.messages },
      sender_domains: await senderDomains(ctx.store, id),
      categories: await categoryCount(ctx.store, id),
    },
  };
}
