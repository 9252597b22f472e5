import type { ProviderAccount } from '../contract/providerAccount.js';

export type Strategy = 'fallback' | 'round-robin' | 'random' | 'free-first';

export interface RoutingContext {
  nextRotation(projectId: string): number;
  hasFreeAllowance(account: ProviderAccount): boolean;
  random(): number;
}

/** A pin or preference list restricts the candidates to exactly those slugs, in order; otherwise the strategy orders them (docs/delivery.md). */
export function orderCandidates(
  accounts: ProviderAccount[],
  pin: string | string[] | null,
  strategy: Strategy,
  ctx: RoutingContext,
  projectId: string,
): ProviderAccount[] {
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
      return [
        ...accounts.filter((a) => ctx.hasFreeAllowance(a)),
        ...accounts.filter((a) => !ctx.hasFreeAllowance(a)),
      ];
    default:
      return [...accounts];
  }
}
