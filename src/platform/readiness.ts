/** One check of `GET /readyz`: whether it passes, and a short reason when it does not. */
export interface CheckResult {
  ok: boolean;
  detail?: string;
}

export interface ReadinessReport {
  status: 'ready' | 'not_ready';
  /** The names of the checks that failed (empty when ready). */
  failing: string[];
  checks: Record<string, CheckResult>;
}

export type ReadinessCheck = () => CheckResult | Promise<CheckResult>;

/**
 * GET /readyz on every listener: whether this process should be sent mail now. The wiring
 * names the checks (the index writable, the writer thread answering, the disk above its guard,
 * every listener bound); each runs on every request, so they are cheap or bounded by a timeout.
 * /healthz stays a liveness check (the process answers and its index reads).
 */
export class Readiness {
  private readonly checks = new Map<string, ReadinessCheck>();

  add(name: string, check: ReadinessCheck): this {
    this.checks.set(name, check);
    return this;
  }

  async report(): Promise<ReadinessReport> {
    const entries = await Promise.all(
      [...this.checks].map(async ([name, check]): Promise<[string, CheckResult]> => {
        try {
          return [name, await check()];
        } catch (err) {
          return [name, { ok: false, detail: (err as Error).message }];
        }
      }),
    );
    const checks = Object.fromEntries(entries);
    const failing = entries.filter(([, r]) => !r.ok).map(([name]) => name);
    return { status: failing.length === 0 ? 'ready' : 'not_ready', failing, checks };
  }
}
