import { newProjectId } from '../ids.js';
import { getProject, insertProject, markProjectDeleted, setProjectPaused, setProjectPlan, type ProjectRow } from '../store/projects.js';
import { projectHeldMessages, transitionMessage } from '../store/messages.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';

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

export const PLAN_NAMES = ['free', 'pro'] as const;

function checkPlan(plan: string): void {
  if (!(PLAN_NAMES as readonly string[]).includes(plan)) {
    throw new OperatorError('invalid_argument', `unknown plan "${plan}" (one of: ${PLAN_NAMES.join(', ')})`);
  }
}

export function requireProject(ctx: OperatorContext, id: string): ProjectRow {
  const project = getProject(ctx.db, id);
  if (!project) throw notFound('project', id);
  return project;
}

export function createProject(ctx: OperatorContext, name: string, plan = 'free'): ProjectView {
  if (name.trim() === '') throw new OperatorError('invalid_argument', 'project name must not be empty');
  checkPlan(plan);
  const id = newProjectId();
  insertProject(ctx.db, { id, name, plan, created_at: ctx.clock.now() });
  return projectView(requireProject(ctx, id));
}

/** Pausing holds new messages (status `paused`); resuming releases the ones held only by the pause. */
export function setPaused(ctx: OperatorContext, id: string, paused: boolean): ProjectView & { released?: number } {
  return ctx.db.transaction(() => {
    requireProject(ctx, id);
    setProjectPaused(ctx.db, id, paused);
    if (paused) return projectView(requireProject(ctx, id));
    const now = ctx.clock.now();
    let released = 0;
    for (const m of projectHeldMessages(ctx.db, id)) {
      if (m.status === 'captured') {
        // A sandbox message stays captured; it is simply no longer held by the pause.
        transitionMessage(ctx.db, m.id, ['captured'], { status: 'captured', hold_reason: null, next_attempt_at: null }, now);
        continue;
      }
      const scheduled = m.scheduled_at !== null && m.scheduled_at > now;
      if (transitionMessage(ctx.db, m.id, ['paused'], { status: scheduled ? 'scheduled' : 'queued', hold_reason: null, next_attempt_at: scheduled ? m.scheduled_at : now }, now)) released++;
    }
    return { ...projectView(requireProject(ctx, id)), released };
  }).immediate();
}

export function changePlan(ctx: OperatorContext, id: string, plan: string): ProjectView {
  checkPlan(plan);
  requireProject(ctx, id);
  setProjectPlan(ctx.db, id, plan);
  return projectView(requireProject(ctx, id));
}

/** Soft delete: its keys stop working at once (invalid_api_key); its messages stay for audit. */
export function deleteProject(ctx: OperatorContext, id: string): { id: string; deleted: true } {
  requireProject(ctx, id);
  markProjectDeleted(ctx.db, id, ctx.clock.now());
  return { id, deleted: true };
}
