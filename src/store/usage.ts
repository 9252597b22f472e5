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
