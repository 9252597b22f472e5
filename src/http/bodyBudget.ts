import { ContractError } from '../contract/errors.js';

interface Waiter {
  lease: Lease;
  bytes: number;
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** Bytes of the budget held by one request; released once its response is done. */
export interface BodyLease {
  readonly bytes: number;
  /** Waits until the lease holds at least `bytes` (a body without Content-Length, as it grows). */
  growTo(bytes: number): Promise<void>;
  release(): void;
}

class Lease implements BodyLease {
  bytes = 0;
  released = false;

  constructor(private readonly budget: BodyBudget) {}

  growTo(bytes: number): Promise<void> {
    return bytes <= this.bytes ? Promise.resolve() : this.budget.take(this, bytes - this.bytes, true);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this);
  }
}

/**
 * The memory budget of request bodies in flight (`http.max_inflight_body_bytes`): a request
 * holds its body's bytes from before it is read until its response is done, since the body,
 * its text and its parsed form live that long. A request that does not fit waits, first come
 * first served, up to `waitMs`, then is refused `503 server_busy` with `Retry-After`. A request
 * bigger than the whole budget runs when nothing else holds any.
 */
export class BodyBudget {
  private used = 0;
  private readonly queue: Waiter[] = [];

  constructor(
    private readonly capacity: number,
    private readonly waitMs: number,
  ) {}

  /** Bytes held right now (for tests and benchmarks). */
  get inUse(): number {
    return this.used;
  }

  /** A lease of `bytes` if they fit now (and nobody waits before), else null. */
  tryAcquire(bytes: number): BodyLease | null {
    if (this.queue.length > 0) return null;
    const lease = new Lease(this);
    if (!this.fits(lease, bytes)) return null;
    this.grant(lease, bytes);
    return lease;
  }

  /** A lease of `bytes`, once they fit; `signal` (the client went away) withdraws the request. */
  async acquire(bytes: number, signal?: AbortSignal): Promise<BodyLease> {
    const lease = new Lease(this);
    await this.take(lease, bytes, false, signal);
    return lease;
  }

  /** @internal Adds `bytes` to `lease` when they fit; a growing lease goes before new ones. */
  take(lease: Lease, bytes: number, growing: boolean, signal?: AbortSignal): Promise<void> {
    if (this.queue.length === 0 && this.fits(lease, bytes)) {
      this.grant(lease, bytes);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        lease,
        bytes,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.withdraw(waiter);
          const seconds = Math.max(1, Math.ceil(this.waitMs / 1000));
          reject(
            new ContractError('server_busy', {
              message: `Too many large request bodies are being processed; nothing was accepted. Retry in ${seconds} second${seconds === 1 ? '' : 's'}.`,
              headers: { 'Retry-After': String(seconds) },
            }),
          );
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

  /** @internal */
  give(lease: Lease): void {
    this.used -= lease.bytes;
    lease.bytes = 0;
    for (const waiter of this.queue.filter((w) => w.lease === lease)) {
      this.withdraw(waiter);
      waiter.reject(new Error('request finished while waiting for its body budget'));
    }
    this.drain();
  }

  /** Everything else it could wait for is released: a lone request may exceed the budget. */
  private fits(lease: Lease, bytes: number): boolean {
    return this.used + bytes <= this.capacity || this.used === lease.bytes;
  }

  private grant(lease: Lease, bytes: number): void {
    if (lease.released) return;
    this.used += bytes;
    lease.bytes += bytes;
  }

  private withdraw(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const at = this.queue.indexOf(waiter);
    if (at !== -1) this.queue.splice(at, 1);
    // The head may have been what blocked the others.
    if (at === 0) this.drain();
  }

  private drain(): void {
    while (this.queue.length > 0 && this.fits(this.queue[0].lease, this.queue[0].bytes)) {
      const waiter = this.queue.shift()!;
      clearTimeout(waiter.timer);
      this.grant(waiter.lease, waiter.bytes);
      waiter.resolve();
    }
  }
}
