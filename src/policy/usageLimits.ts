import type { PlanConfig } from '../config/load.js';
import type { ErrorCode } from '../contract/errors.js';
import type { Db } from '../store/db.js';
import {
  addUsage, categoryCount, categoryKnown, dayPeriod, monthPeriod, registerCategory, registerSenderDomain, senderDomainCount,
  senderDomainKnown, usageFor,
} from '../store/usage.js';

/** What the limits need to know about one message (plain data: it crosses to the index writer). */
export interface UsageFacts {
  projectId: string;
  environment: 'production' | 'sandbox';
  senderDomain: string;
  category: string | null;
  /** Bytes of the stored MIME; 0 in the pre-check, before the message is composed. */
  bytes: number;
}

export interface LimitSettings {
  enabled: boolean;
  plans: Record<string, PlanConfig | undefined>;
  defaultPlan: string;
  categoriesPerProject: number;
}

export interface Refusal {
  code: ErrorCode;
  message: string;
  retryAfterSeconds?: number;
}

const DAY_MS = 86_400_000;

function nextMonthStart(now: number): string {
  const d = new Date(now);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
}

/** A project's plan; one removed from the config falls back to the default plan (checked at load). */
export function planFor(settings: LimitSettings, name: string): PlanConfig {
  return settings.plans[name] ?? settings.plans[settings.defaultPlan]!;
}

/**
 * The project caps and plan quotas, in the documented order: sender-domain cap, category cap
 * (both environments: they are project configuration), then — production only, since sandbox
 * mail is never sent — monthly messages, monthly bytes, daily ceiling. Read-only: the same
 * function serves the cheap pre-check before composing and the authoritative check inside the
 * transaction that stores the message, so concurrent sends can never overshoot a cap.
 */
export function usageRefusal(db: Db, facts: UsageFacts, planName: string, settings: LimitSettings, now: number): Refusal | null {
  if (!settings.enabled) return null;
  const plan = planFor(settings, planName);
  if (plan.sender_domains !== null && !senderDomainKnown(db, facts.projectId, facts.senderDomain) && senderDomainCount(db, facts.projectId) >= plan.sender_domains) {
    return {
      code: 'sender_domain:limit_reached',
      message: `The sender domain ${facts.senderDomain} is new and the plan allows ${plan.sender_domains} sender domain${plan.sender_domains === 1 ? '' : 's'}.`,
    };
  }
  if (facts.category !== null && !categoryKnown(db, facts.projectId, facts.category) && categoryCount(db, facts.projectId) >= settings.categoriesPerProject) {
    return { code: 'category:limit_reached', message: `The project already has ${settings.categoriesPerProject} distinct categories; "${facts.category}" is new.` };
  }
  if (facts.environment === 'sandbox') return null;
  const month = usageFor(db, facts.projectId, monthPeriod(now));
  if (!plan.overage && month.messages >= plan.monthly_messages) {
    return { code: 'monthly_quota_exceeded', message: `The plan's monthly quota of ${plan.monthly_messages} messages is spent; it renews on ${nextMonthStart(now)} or when the plan changes.` };
  }
  const byteCap = Math.floor(plan.monthly_bytes * (1 + plan.bytes_grace_percent / 100));
  if (month.bytes + Math.max(facts.bytes, 1) > byteCap) {
    return { code: 'throughput_quota_exceeded', message: `The plan's monthly data volume of ${byteCap} bytes is spent; it renews on ${nextMonthStart(now)} or when the plan changes.` };
  }
  if (plan.daily_messages !== null) {
    const day = usageFor(db, facts.projectId, dayPeriod(now));
    if (day.messages >= plan.daily_messages) {
      const untilMidnight = DAY_MS - (now % DAY_MS);
      return {
        code: 'daily_send_cap_exceeded',
        message: `The plan's daily ceiling of ${plan.daily_messages} messages is reached; it resets at 00:00 UTC.`,
        retryAfterSeconds: Math.max(1, Math.ceil(untilMidnight / 1000)),
      };
    }
  }
  return null;
}

/** Counts an accepted message; runs in the transaction that stores it. */
export function recordUsage(db: Db, facts: UsageFacts, settings: LimitSettings, now: number): void {
  if (!settings.enabled) return;
  registerSenderDomain(db, facts.projectId, facts.senderDomain, now);
  if (facts.category !== null) registerCategory(db, facts.projectId, facts.category, now);
  if (facts.environment === 'sandbox') return;
  addUsage(db, facts.projectId, monthPeriod(now), facts.bytes);
  addUsage(db, facts.projectId, dayPeriod(now), facts.bytes);
}

export function limitSettings(config: { policy: { enabled: boolean }; plans: Record<string, PlanConfig | undefined>; default_plan: string; limits: { categories_per_project: number } }): LimitSettings {
  return { enabled: config.policy.enabled, plans: config.plans, defaultPlan: config.default_plan, categoriesPerProject: config.limits.categories_per_project };
}
