/**
 * Long synchronous work cut into slices: between slices the event loop serves both doors
 * (a body's structure check, a batch's element checks). `if (slices.spent) await slices.next()`.
 */
export class TimeSlices {
  private started = performance.now();

  constructor(private readonly sliceMs: number) {}

  /** True once the current slice has run its time. */
  get spent(): boolean {
    return performance.now() - this.started >= this.sliceMs;
  }

  /** Gives the event loop a turn, then starts the next slice. */
  async next(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.started = performance.now();
  }
}
