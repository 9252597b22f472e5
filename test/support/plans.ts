/** Plans for the quota suites: the config's defaults, and a builder for one with a given cap. */
export const GIB = 1024 ** 3;
/** More bytes than any test sends: a plan without a volume cap in practice. */
export const HUGE = 1_000_000_000_000;

export const DEFAULT_PLANS = {
  free: {
    monthly_messages: 3000,
    overage: false,
    daily_messages: 100,
    monthly_bytes: GIB,
    bytes_grace_percent: 0,
    sender_domains: 1,
  },
  pro: {
    monthly_messages: 50000,
    overage: true,
    daily_messages: null,
    monthly_bytes: 50 * GIB,
    bytes_grace_percent: 10,
    sender_domains: 10,
  },
};

/** The config's `default_plan` (free) and `plans`: the defaults and `extra`. */
export const withPlans = (extra: Record<string, ReturnType<typeof plan>>) => ({
  default_plan: 'free',
  plans: { ...DEFAULT_PLANS, ...extra },
});

/** A plan with the given caps; everything not given is unlimited (no overage). */
export const plan = (fields: {
  monthly_messages: number;
  overage?: boolean;
  daily_messages?: number | null;
  monthly_bytes?: number;
  bytes_grace_percent?: number;
}) => ({
  overage: false,
  daily_messages: null,
  monthly_bytes: HUGE,
  bytes_grace_percent: 0,
  sender_domains: null,
  ...fields,
});
