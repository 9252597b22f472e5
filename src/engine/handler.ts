/** What the leased-work engine (leasedWork.ts) asks of the work it runs: delivery's, webhooks'. */

export type WorkId = string | number;

export interface ExchangeRequest<O> {
  /** Those kept from a failed exchange first. */
  outcomes: O[];
  /** False once stopping: outcomes only. */
  lease: boolean;
  running: number;
  perKey: ReadonlyMap<string, number>;
  /** Leased and not finished, or its outcome not yet recorded. */
  held: ReadonlySet<WorkId>;
  /** A lease commit was in doubt: take back this node's own leases not in `held`. */
  reclaim: boolean;
}

export interface ExchangeResult<I> {
  leased: I[];
  /** Exchange again after the gap rather than the poll interval. */
  more: boolean;
  /** Waiting work let go (an endpoint disabled) stays leased in the store until its lease runs out. */
  dropKeys?: string[];
}

export interface LeasedWorkHandler<I, O> {
  /** The held set counts it once, however often the store hands it out. */
  idOf(item: I): WorkId;
  keyOf(item: I): string;
  exchange(request: ExchangeRequest<O>): Promise<ExchangeResult<I>>;
  /** `emit` hands the writer an outcome on the way; the final one (null: nothing to record) releases it once recorded. */
  run(item: I, emit: (outcome: O) => void): Promise<O | null>;
  /** An outcome to send again (first in line), or null to drop it. */
  afterFailure(err: unknown, outcome: O): O | null;
  /** Whether a failed commit may have landed all the same. */
  inDoubt(err: unknown): boolean;
  /** The gap between writes while there is work; 0: at once. */
  spacingMs(): number;
  /** A CPU budget's hold on new starts; 0: start. */
  holdMs?(): number;
}
