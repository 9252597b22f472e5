import type { PlanConfig } from '../config/load.js';
import type { ErrorCode } from '../contract/errors.js';
import type { Queries } from '../store/queries.js';
import {
  addUsage,
  categoryCount,
  categoryKnown,
  dayPeriod,
  monthPeriod,
  registerCategory,
  registerSenderDomain,
  senderDomainCount,
  senderDomainKnown,
  type UsageCounter,
  type UsageState,
  usageFor,
} from '../store/usage.js';

/** Plain data: it crosses to the index writer. */
export interface UsageFacts {
  projectId: string;
  environment: 'production' | 'sandbox';
  senderDomain: string;
  category: string | null;
  /** 0 in the pre-check, before the message is composed. */
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

/** A plan removed from the config falls back to the default plan. */
export function planFor(settings: LimitSettings, name: string): PlanConfig {
  return settings.plans[name] ?? settings.plans[settings.defaultPlan]!;
}

export interface UsageReads {
  senderDomain: boolean;
  category: boolean;
  month: boolean;
  day: boolean;
}

const NOTHING_USED: UsageCounter = Object.freeze({ messages: 0, bytes: 0 });

export function usageReads(
  facts: UsageFacts,
  plan: PlanConfig,
  settings: LimitSettings,
): UsageReads {
  if (!settings.enabled) return { senderDomain: false, category: false, month: false, day: false };
  const production = facts.environment === 'production';
  return {
    senderDomain: plan.sender_domains !== null,
    category: facts.category !== null,
    month: production,
    day: production && plan.daily_messages !== null,
  };
}

/**
 * The caps and quotas in the documented order. Pure: both stores judge by it, in the pre-check and again inside the
 * transaction that stores the message, so concurrent sends never overshoot a cap.
 */
export function decideUsage(
  facts: UsageFacts,
  state: UsageState,
  plan: PlanConfig,
  settings: LimitSettings,
  now: number,
): Refusal | null {
  if (!settings.enabled) return null;
  if (
    plan.sender_domains !== null &&
    !state.senderDomainKnown &&
    state.senderDomainCount >= plan.sender_domains
  ) {
    return {
      code: 'sender_domain:limit_reached',
      message: `The sender domain ${facts.senderDomain} is new and the plan allows ${plan.sender_domains} sender domain${plan.sender_domains === 1 ? '' : 's'}.`,
    };
  }
  if (
    facts.category !== null &&
    !state.categoryKnown &&
    state.categoryCount >= settings.categoriesPerProject
  ) {
    return {
      code: 'category:limit_reached',
      message: `The project already has ${settings.categoriesPerProject} distinct categories; "${facts.category}" is new.`,
    };
  }
  if (facts.environment === 'sandbox') return null;
  const month = state.month;
  if (!plan.overage && month.messages >= plan.monthly_messages) {
    return {
      code: 'monthly_quota_exceeded',
      message: `The plan's monthly quota of ${plan.monthly_messages} messages is spent; it renews on ${nextMonthStart(now)} or when the plan changes.`,
    };
  }
  const byteCap = Math.floor(plan.monthly_bytes * (1 + plan.bytes_grace_percent / 100));
  if (month.bytes + Math.max(facts.bytes, 1) > byteCap) {
    return {
      code: 'throughput_quota_exceeded',
      message: `The plan's monthly data volume of ${byteCap} bytes is spent; it renews on ${nextMonthStart(now)} or when the plan changes.`,
    };
  }
  if (plan.daily_messages !== null && state.day.messages >= plan.daily_messages) {
    const untilMidnight = DAY_MS - (now % DAY_MS);
    return {
      code: 'daily_send_cap_exceeded',
      message: `The plan's daily ceiling of ${plan.daily_messages} messages is reached; it resets at 00:00 UTC.`,
      retryAfterSeconds: Math.max(1, Math.ceil(untilMidnight / 1000)),
    };
  }
  return null;
}

/** A known domain or category skips its count, as the rules never look at it. */
async function sqliteUsageState(
  q: Queries,
  facts: UsageFacts,
  plan: PlanConfig,
  settings: LimitSettings,
  now: number,
): Promise<UsageState> {
  const reads = usageReads(facts, plan, settings);
  const senderDomainIsKnown =
    !reads.senderDomain || (await senderDomainKnown(q, facts.projectId, facts.senderDomain));
  const categoryIsKnown =
    !reads.category || (await categoryKnown(q, facts.projectId, facts.category!));
  return {
    senderDomainKnown: senderDomainIsKnown,
    senderDomainCount: senderDomainIsKnown ? 0 : await senderDomainCount(q, facts.projectId),
    categoryKnown: categoryIsKnown,
    categoryCount: categoryIsKnown ? 0 : await categoryCount(q, facts.projectId),
    month: reads.month ? await usageFor(q, facts.projectId, monthPeriod(now)) : NOTHING_USED,
    day: reads.day ? await usageFor(q, facts.projectId, dayPeriod(now)) : NOTHING_USED,
  };
}

export async function usageRefusal(
  q: Queries,
  facts: UsageFacts,
  planName: string,
  settings: LimitSettings,
  now: number,
): Promise<Refusal | null> {
  if (!settings.enabled) return null;
  const plan = planFor(settings, planName);
  return decideUsage(
    facts,
    await sqliteUsageState(q, facts, plan, settings, now),
    plan,
    settings,
    now,
  );
}

export interface UsageWrites {
  /** Sender domains and categories are only ever added. */
  senderDomain: string | null;
  category: string | null;
  /** This month's and today's, production only. */
  periods: string[];
  bytes: number;
}

export function usageWrites(facts: UsageFacts, settings: LimitSettings, now: number): UsageWrites {
  if (!settings.enabled) return { senderDomain: null, category: null, periods: [], bytes: 0 };
  return {
    senderDomain: facts.senderDomain,
    category: facts.category,
    periods: facts.environment === 'sandbox' ? [] : [monthPeriod(now), dayPeriod(now)],
    bytes: facts.bytes,
  };
}

/** Runs in the transaction that stores the message. */
export async function recordUsage(
  q: Queries,
  facts: UsageFacts,
  settings: LimitSettings,
  now: number,
): Promise<void> {
  const writes = usageWrites(facts, settings, now);
  if (writes.senderDomain !== null)
    await registerSenderDomain(q, facts.projectId, writes.senderDomain, now);
  if (writes.category !== null) await registerCategory(q, facts.projectId, writes.category, now);
  for (const period of writes.periods) await addUsage(q, facts.projectId, period, writes.bytes);
}

export function limitSettings(config: {
  policy: { enabled: boolean };
  plans: Record<string, PlanConfig | undefined>;
  default_plan: string;
  limits: { categories_per_project: number };
}): LimitSettings {
  return {
    enabled: config.policy.enabled,
    plans: config.plans,
    defaultPlan: config.default_plan,
    categoriesPerProject: config.limits.categories_per_project,
  };
}
