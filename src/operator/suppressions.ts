import { isEmail } from '../contract/address.js';
import {
  listSuppressions,
  type SuppressionRow,
  searchSuppressions,
} from '../store/suppressions.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { OperatorError } from './errors.js';
import { decodeCursor, encodeCursor, pageLimit } from './pages.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

const view = (r: SuppressionRow) => ({
  email: r.email,
  reason: r.reason,
  created_at: iso(r.created_at)!,
});

function checkEmail(email: string): void {
  if (!isEmail(email))
    throw new OperatorError('invalid_argument', `"${email}" is not an email address`, 'email');
}

export async function suppress(
  ctx: OperatorContext,
  projectId: string,
  email: string,
  reason = 'manual',
): Promise<{ project_id: string; email: string; reason: string; created_at: string }> {
  await requireProject(ctx, projectId);
  checkEmail(email);
  await write(ctx, {
    type: 'suppression_add',
    row: { project_id: projectId, email, reason, created_at: ctx.clock.now() },
    stamp: auditStamp(ctx),
  });
  const row = (await listSuppressions(ctx.store, projectId)).find(
    (r) => r.email.toLowerCase() === email.toLowerCase(),
  )!;
  return { project_id: projectId, ...view(row) };
}

export async function unsuppress(
  ctx: OperatorContext,
  projectId: string,
  email: string,
): Promise<{ project_id: string; email: string; removed: true }> {
  await requireProject(ctx, projectId);
  await write(ctx, {
    type: 'suppression_remove',
    project_id: projectId,
    email,
    stamp: auditStamp(ctx),
  });
  return { project_id: projectId, email, removed: true };
}

export async function suppressionList(
  ctx: OperatorContext,
  projectId: string,
): Promise<{ suppressions: ReturnType<typeof view>[] }> {
  await requireProject(ctx, projectId);
  return { suppressions: (await listSuppressions(ctx.store, projectId)).map(view) };
}

/** A page of suppressions in address order, those containing `q` when given. */
export async function suppressionSearch(
  ctx: OperatorContext,
  projectId: string,
  opts: { q?: string; limit?: number; cursor?: string } = {},
) {
  await requireProject(ctx, projectId);
  const limit = pageLimit(opts.limit, 100, 1000);
  const after = opts.cursor === undefined ? null : decodeCursor(opts.cursor);
  const rows = await searchSuppressions(ctx.store, projectId, opts.q ?? null, after, limit + 1);
  const page = rows.slice(0, limit);
  return {
    suppressions: page.map(view),
    next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1].email) : null,
  };
}

/** RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled. */
const csvField = (v: string) => (/[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);

/** The project's suppressions as CSV (`email,reason,created_at`), a chunk of rows at a time: memory stays flat. */
export async function* suppressionCsv(
  ctx: OperatorContext,
  projectId: string,
  chunkRows = 1000,
): AsyncGenerator<string> {
  await requireProject(ctx, projectId);
  yield 'email,reason,created_at\r\n';
  let after: string | null = null;
  for (;;) {
    const rows = await searchSuppressions(ctx.store, projectId, null, after, chunkRows);
    if (rows.length === 0) return;
    yield rows
      .map((r) => `${csvField(r.email)},${csvField(r.reason)},${iso(r.created_at)}\r\n`)
      .join('');
    if (rows.length < chunkRows) return;
    after = rows[rows.length - 1].email;
  }
}
