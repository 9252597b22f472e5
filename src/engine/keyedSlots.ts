/**
 * Slots per key for work whose key is chosen while it runs (a hand-off tries one provider
 * account after another): at most `limit` at once per key, the rest wait in turn.
 */
export class KeyedSlots {
  private readonly used = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(private limit: number) {}

  /** A new limit (the nodes up changed); a larger one lets waiting work go at once. */
  setLimit(limit: number): void {
    if (limit === this.limit) return;
    const grew = limit > this.limit;
    this.limit = limit;
    if (!grew) return;
    for (const [key, list] of this.waiting) {
      let free = this.limit - (this.used.get(key) ?? 0);
      while (free-- > 0 && list.length > 0) list.shift()!();
    }
  }

  async acquire(key: string): Promise<void> {
    while ((this.used.get(key) ?? 0) >= this.limit) {
      await new Promise<void>((resolve) => {
        const list = this.waiting.get(key) ?? [];
        list.push(resolve);
        this.waiting.set(key, list);
      });
    }
    this.used.set(key, (this.used.get(key) ?? 0) + 1);
  }

  release(key: string): void {
    this.used.set(key, (this.used.get(key) ?? 1) - 1);
    this.waiting.get(key)?.shift()?.();
  }
}
