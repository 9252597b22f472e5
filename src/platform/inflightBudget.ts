interface Waiter {
  lease: Lease;
  amount: number;
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export interface BudgetLease {
  readonly amount: number;
  /** An HTTP body without Content-Length, as it grows. */
  growTo(amount: number): Promise<void>;
  release(): void;
}

class Lease implements BudgetLease {
  amount = 0;
  released = false;

  constructor(private readonly budget: InflightBudget) {}

  growTo(amount: number): Promise<void> {
    return amount <= this.amount
      ? Promise.resolve()
      : this.budget.take(this, amount - this.amount, true);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this);
  }
}

/**
 * Bounds memory spent on messages in flight, on either door. Work that does not fit waits in order, its client held back
 * by TCP, up to `waitMs`, then is refused; work bigger than the whole budget runs when nothing else holds any.
 */
export class InflightBudget {
  private used = 0;
  private readonly queue: Waiter[] = [];

  constructor(
    private readonly capacity: number,
    private readonly waitMs: number,
    private readonly refusal: (retryAfterSeconds: number) => Error,
  ) {}

  get inUse(): number {
    return this.used;
  }

  /** Only if nobody waits before. */
  tryAcquire(amount: number): BudgetLease | null {
    if (this.queue.length > 0) return null;
    const lease = new Lease(this);
    if (!this.fits(lease, amount)) return null;
    this.grant(lease, amount);
    return lease;
  }

  /** `signal` (the client went away) withdraws the request. */
  async acquire(amount: number, signal?: AbortSignal): Promise<BudgetLease> {
    const lease = new Lease(this);
    await this.take(lease, amount, false, signal);
    return lease;
  }

  /** @internal A growing lease goes before new ones. */
  take(lease: Lease, amount: number, growing: boolean, signal?: AbortSignal): Promise<void> {
    if (this.queue.length === 0 && this.fits(lease, amount)) {
      this.grant(lease, amount);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        lease,
        amount,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.withdraw(waiter);
          reject(this.refusal(Math.max(1, Math.ceil(this.waitMs / 1000))));
        }, this.waitMs),
      };
      signal?.addEventListener(
        'abort',
        () => {
          this.withdraw(waiter);
          reject(signal.reason instanceof Error ? signal.reason : new Error('request withdrawn'));
        },
        { once: true },
      );
      if (growing) this.queue.unshift(waiter);
      else this.queue.push(waiter);
    });
  }

  give(lease: Lease): void {
    this.used -= lease.amount;
    lease.amount = 0;
    for (const waiter of this.queue.filter((w) => w.lease === lease)) {
      this.withdraw(waiter);
      waiter.reject(new Error('work finished while waiting for its budget'));
    }
    this.drain();
  }

  /** Lone work may exceed the budget. */
  private fits(lease: Lease, amount: number): boolean {
    return this.used + amount <= this.capacity || this.used === lease.amount;
  }

  private grant(lease: Lease, amount: number): void {
    if (lease.released) return;
    this.used += amount;
    lease.amount += amount;
  }

  private withdraw(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const at = this.queue.indexOf(waiter);
    if (at !== -1) this.queue.splice(at, 1);
    // The head may have been what blocked the others.
    if (at === 0) this.drain();
  }

  private drain(): void {
    while (this.queue.length > 0 && this.fits(this.queue[0].lease, this.queue[0].amount)) {
      const waiter = this.queue.shift()!;
      clearTimeout(waiter.timer);
      this.grant(waiter.lease, waiter.amount);
      waiter.resolve();
    }
  }
}
