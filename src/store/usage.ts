import { sql, type Db } from './db.js';

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

export function usageFor(db: Db, projectId: string, period: string): UsageCounter {
  return (sql(db, 'SELECT messages, bytes FROM usage_counters WHERE project_id = ? AND period = ?').get(projectId, period) as UsageCounter | undefined) ?? {
    messages: 0,
    bytes: 0,
  };
}

export function addUsage(db: Db, projectId: string, period: string, bytes: number): void {
  sql(
    db,
    `INSERT INTO usage_counters (project_id, period, messages, bytes) VALUES (?, ?, 1, ?)
     ON CONFLICT (project_id, period) DO UPDATE SET messages = messages + 1, bytes = bytes + excluded.bytes`,
  ).run(projectId, period, bytes);
}

export function senderDomainKnown(db: Db, projectId: string, domain: string): boolean {
  return sql(db, 'SELECT 1 FROM sender_domains WHERE project_id = ? AND domain = ?').get(projectId, domain) !== undefined;
}

export function senderDomainCount(db: Db, projectId: string): number {
  return sql(db, 'SELECT COUNT(*) FROM sender_domains WHERE project_id = ?').pluck().get(projectId) as number;
}

export function registerSenderDomain(db: Db, projectId: string, domain: string, now: number): void {
  sql(db, 'INSERT OR IGNORE INTO sender_domains (project_id, domain, first_used_at) VALUES (?, ?, ?)').run(projectId, domain, now);
}

export function categoryKnown(db: Db, projectId: string, name: string): boolean {
  return sql(db, 'SELECT 1 FROM categories WHERE project_id = ? AND name = ?').get(projectId, name) !== undefined;
}

export function categoryCount(db: Db, projectId: string): number {
  return sql(db, 'SELECT COUNT(*) FROM categories WHERE project_id = ?').pluck().get(projectId) as number;
}

export function registerCategory(db: Db, projectId: string, name: string, now: number): void {
  sql(db, 'INSERT OR IGNORE INTO categories (project_id, name, first_used_at) VALUES (?, ?, ?)').run(projectId, name, now);
}

export function senderDomains(db: Db, projectId: string): string[] {
  return sql(db, 'SELECT domain FROM sender_domains WHERE project_id = ? ORDER BY first_used_at, domain').pluck().all(projectId) as string[];
}
