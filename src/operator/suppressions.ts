import { isEmail } from '../contract/address.js';
import { addSuppression, listSuppressions, removeSuppression, type SuppressionRow } from '../store/suppressions.js';
import { iso, type OperatorContext } from './context.js';
import { notFound, OperatorError } from './errors.js';
import { requireProject } from './projects.js';

const view = (r: SuppressionRow) => ({ email: r.email, reason: r.reason, created_at: iso(r.created_at)! });

function checkEmail(email: string): void {
  if (!isEmail(email)) throw new OperatorError('invalid_argument', `"${email}" is not an email address`);
}

export function suppress(ctx: OperatorContext, projectId: string, email: string, reason = 'manual'): { project_id: string; email: string; reason: string; created_at: string } {
  requireProject(ctx, projectId);
  checkEmail(email);
  addSuppression(ctx.db, { project_id: projectId, email, reason, created_at: ctx.clock.now() });
  const row = listSuppressions(ctx.db, projectId).find((r) => r.email.toLowerCase() === email.toLowerCase())!;
  return { project_id: projectId, ...view(row) };
}

export function unsuppress(ctx: OperatorContext, projectId: string, email: string): { project_id: string; email: string; removed: true } {
  requireProject(ctx, projectId);
  if (!removeSuppression(ctx.db, projectId, email)) throw notFound('suppression', email);
  return { project_id: projectId, email, removed: true };
}

export function suppressionList(ctx: OperatorContext, projectId: string): { suppressions: ReturnType<typeof view>[] } {
  requireProject(ctx, projectId);
  return { suppressions: listSuppressions(ctx.db, projectId).map(view) };
}
