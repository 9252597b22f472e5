import type { ProviderAccount } from '../contract/providerAccount.js';

export type Strategy = 'fallback' | 'round-robin' | 'random' | 'free-first';

export interface RoutingContext {
  /** A counter per project that advances on every round-robin choice. */
  nextRotation(projectId: string): number;
  /** Whether the account still has free allowance this calendar month. */
  hasFreeAllowance(account: ProviderAccount): boolean;
  random(): number;
}

/**
 * The accounts to try, in order. A pin or preference list restricts the candidates to exactly
 * those slugs, in the list's order (several accounts of one slug by priority), and nothing
 * else. Otherwise the strategy orders all attached accounts (given by priority):
 * `fallback` priority order; `round-robin` priority order rotated one step per message;
 * `random` shuffled; `free-first` accounts with free allowance left first, then the rest,
 * each group by priority.
 */
export function orderCandidates(accounts: ProviderAccount[], pin: string | string[] | null, strategy: Strategy, ctx: RoutingContext, projectId: string): ProviderAccount[] {
  if (pin !== null) {
    const slugs = Array.isArray(pin) ? pin : [pin];
    return slugs.flatMap((slug) => accounts.filter((a) => a.slug === slug));
  }
  switch (strategy) {
    case 'round-robin': {
      if (accounts.length === 0) return [];
      const start = ctx.nextRotation(projectId) % accounts.length;
      return [...accounts.slice(start), ...accounts.slice(0, start)];
    }
    case 'random': {
      const shuffled = [...accounts];
      for (let i = shuffled.length - 1; i > 0; i--) {
        const j = Math.floor(ctx.random() * (i + 1));
        [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
      }
      return shuffled;
    }
    case 'free-first':
      return [...accounts.filter((a) => ctx.hasFreeAllowance(a)), ...accounts.filter((a) => !ctx.hasFreeAllowance(a))];
    default:
      return [...accounts];
  }
}
