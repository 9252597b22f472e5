/** What the leased-work engine (leasedWork.ts) asks of the work it runs: delivery's, webhooks'. */

export type WorkId = string | number;

/** What one exchange with the store is asked to do. */
export interface ExchangeRequest<O> {
  /** Outcomes to record, in the order they came (those kept from a failed exchange first). */
  outcomes: O[];
  /** Whether to lease more (false once stopping: outcomes only). */
  lease: boolean;
  /** Items running now, in all. */
  running: number;
  /** Items leased and running or waiting to run here, per key. */
  perKey: ReadonlyMap<string, number>;
  /** Everything this node holds (leased and not finished, or its outcome not yet recorded). */
  held: ReadonlySet<WorkId>;
  /**
   * An earlier exchange that leased failed with its commit in doubt: take back this node's own
   * leases that it does not hold (`held`), which it may have been given without knowing.
   */
  reclaim: boolean;
}

export interface ExchangeResult<I> {
  /** Work leased to this node, to run. */
  leased: I[];
  /** More may be due at once: exchange again after the gap rather than the poll interval. */
  more: boolean;
  /** Keys whose waiting work is let go (an endpoint disabled): it stays leased in the store until its lease runs out. */
  dropKeys?: string[];
}

/** Delivery and webhooks: what differs between them. */
export interface LeasedWorkHandler<I, O> {
  /** An item's identity: the held set counts it once, however often the store hands it out. */
  idOf(item: I): WorkId;
  /** The key its concurrency is counted under (an endpoint; one key for all when there is no lane limit). */
  keyOf(item: I): string;
  /** One round trip with the store: record the outcomes, lease more. Returns without one when there is nothing to do. */
  exchange(request: ExchangeRequest<O>): Promise<ExchangeResult<I>>;
  /** Runs one item; `emit` hands the writer an outcome on the way. Its final outcome (null: nothing to record) releases it once recorded. */
  run(item: I, emit: (outcome: O) => void): Promise<O | null>;
  /** After a failed exchange: an outcome to send again (first in line), or null to drop it. */
  afterFailure(err: unknown, outcome: O): O | null;
  /** Whether a failed exchange's commit may have landed all the same (a lease it asked for is then taken back). */
  inDoubt(err: unknown): boolean;
  /** Milliseconds from now until the next exchange may come while there is work (a gap between writes); 0: at once. */
  spacingMs(): number;
  /** Milliseconds to hold new starts now (a CPU budget); 0: start. */
  holdMs?(): number;
}
