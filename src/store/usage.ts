import { allValues, getValue, type Queries } from './queries.js';

/** Usage periods are UTC calendar months and days: `M:2026-11`, `D:2026-11-22`. */
export function monthPeriod(nowMs: number): string {
  return `M:${new Date(nowMs).toISOString().slice(0, 7)}`;
}

export function dayPeriod(nowMs: number): string {
  return `D:${new Date(nowMs).toISOString().slice(0, 10)}`;
}

export interface UsageCounter {
  messages: number;
  bytes: number;
}

/**
 * What the caps and quotas (policy/usageLimits.ts decideUsage) read of a project's state for one
 * message. Each store gathers it its own way (usageLimits.ts on SQLite, postgres/acceptance.ts),
 * reading only what `usageReads` asks for; a fact not read holds its neutral value (known, 0),
 * which no rule looks at.
 */
export interface UsageState {
  /** Whether the message's sender domain is already one of the project's. */
  senderDomainKnown: boolean;
  /** How many sender domains the project has; read only for a new domain. */
  senderDomainCount: number;
  /** Whether the message's category is already one of the project's (true without a category). */
  categoryKnown: boolean;
  /** How many categories the project has; read only for a new category. */
  categoryCount: number;
  /** This UTC month's usage; production only. */
  month: UsageCounter;
  /** Today's (UTC) usage; production only, under a plan with a daily ceiling. */
  day: UsageCounter;
}

export async function usageFor(
  q: Queries,
  projectId: string,
  period: string,
): Promise<UsageCounter> {
  return (
    (await q.get<UsageCounter>(
      'SELECT messages, bytes FROM usage_counters WHERE project_id = ? AND period = ?',
      projectId,
      period,
    )) ?? {
      messages: 0,
      bytes: 0,
    }
  );
}

export async function addUsage(
  q: Queries,
  projectId: string,
  period: string,
  bytes: number,
): Promise<void> {
  await q.run(
    `INSERT INTO usage_counters (project_id, period, messages, bytes) VALUES (?, ?, 1, ?)
     ON CONFLICT (project_id, period) DO UPDATE SET messages = messages + 1, bytes = bytes + excluded.bytes`,
    projectId,
    period,
    bytes,
  );
}

export async function senderDomainKnown(
  q: Queries,
  projectId: string,
  domain: string,
): Promise<boolean> {
  return (
    (await q.get(
      'SELECT 1 FROM sender_domains WHERE project_id = ? AND domain = ?',
      projectId,
      domain,
    )) !== undefined
  );
}

export async function senderDomainCount(q: Queries, projectId: string): Promise<number> {
  return (await getValue<number>(
    q,
    'SELECT COUNT(*) FROM sender_domains WHERE project_id = ?',
    projectId,
  ))!;
}

export async function registerSenderDomain(
  q: Queries,
  projectId: string,
  domain: string,
  now: number,
): Promise<void> {
  await q.run(
    'INSERT OR IGNORE INTO sender_domains (project_id, domain, first_used_at) VALUES (?, ?, ?)',
    projectId,
    domain,
    now,
  );
}

export async function categoryKnown(q: Queries, projectId: string, name: string): Promise<boolean> {
  return (
    (await q.get('SELECT 1 FROM categories WHERE project_id = ? AND name = ?', projectId, name)) !==
    undefined
  );
}

export async function categoryCount(q: Queries, projectId: string): Promise<number> {
  return (await getValue<number>(
    q,
    'SELECT COUNT(*) FROM categories WHERE project_id = ?',
    projectId,
  ))!;
}

export async function registerCategory(
  q: Queries,
  projectId: string,
  name: string,
  now: number,
): Promise<void> {
  await q.run(
    'INSERT OR IGNORE INTO categories (project_id, name, first_used_at) VALUES (?, ?, ?)',
    projectId,
    name,
    now,
  );
}

export async function senderDomains(q: Queries, projectId: string): Promise<string[]> {
  return allValues<string>(
    q,
    'SELECT domain FROM sender_domains WHERE project_id = ? ORDER BY first_used_at, domain',
    projectId,
  );
}

/** The projects (not deleted) that have sent from `domain`, by id. */
export async function projectsWithSenderDomain(q: Queries, domain: string): Promise<string[]> {
  return allValues<string>(
    q,
    'SELECT s.project_id FROM sender_domains s JOIN projects p ON p.id = s.project_id WHERE s.domain = ? AND p.deleted_at IS NULL ORDER BY s.project_id',
    domain,
  );
}
