/** Longer than any transaction holds a seq uncommitted. */
export const GAP_WAIT_MS = 60_000;
/** The newest kept: each read asks for them by primary key. */
const MAX_GAPS = 10_000;

export interface SeqSource<Row extends { seq: number }> {
  after(seq: number, limit: number): Promise<Row[]>;
  at(seqs: number[]): Promise<Row[]>;
  timeOf(row: Row): number;
}

/**
 * Follows a table by its seq without missing a row that commits late: on PostgreSQL seq 41 may commit after 42,
 * so each skipped seq is asked for again until GAP_WAIT_MS after (docs/architecture.md#the-stores-seams).
 */
export class SeqFollower<Row extends { seq: number }> {
  /** Skipped seq → until when it is looked for. */
  private readonly gaps = new Map<number, number>();

  constructor(
    private readonly source: SeqSource<Row>,
    private cursor: number,
  ) {}

  /** Gap fillers first, then up to `limit` after the cursor; `full`: more may follow at once. */
  async next(limit: number, now: number): Promise<{ rows: Row[]; full: boolean }> {
    for (const [seq, until] of this.gaps) if (until < now) this.gaps.delete(seq);
    const late = this.gaps.size > 0 ? await this.source.at([...this.gaps.keys()]) : [];
    for (const row of late) this.gaps.delete(row.seq);
    const rows = await this.source.after(this.cursor, limit);
    for (const row of rows) {
      const until = this.source.timeOf(row) + GAP_WAIT_MS;
      if (until >= now)
        for (let seq = Math.max(this.cursor + 1, row.seq - MAX_GAPS); seq < row.seq; seq++)
          this.gaps.set(seq, until);
      this.cursor = row.seq;
    }
    // The oldest gaps give way first (a Map keeps insertion order).
    for (const seq of this.gaps.keys()) {
      if (this.gaps.size <= MAX_GAPS) break;
      this.gaps.delete(seq);
    }
    return { rows: [...late, ...rows], full: rows.length === limit };
  }
}
