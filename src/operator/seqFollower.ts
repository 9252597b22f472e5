/** How long a seq skipped over is looked for again: longer than any transaction holds one uncommitted. */
export const GAP_WAIT_MS = 60_000;
/** The most skipped seqs remembered at once (the newest kept): each read asks for them by primary key. */
const MAX_GAPS = 10_000;

/** How a follower reads its table: the rows after a seq, and rows by seq. */
export interface SeqSource<Row extends { seq: number }> {
  after(seq: number, limit: number): Promise<Row[]>;
  at(seqs: number[]): Promise<Row[]>;
  /** When a row was written (the clock's ms): a gap below it is looked for until GAP_WAIT_MS after. */
  timeOf(row: Row): number;
}

/**
 * Follows a table by its seq (the events outbox, hand-off attempts) without missing a row that
 * commits late. On PostgreSQL a seq (an identity value) is taken when the row is inserted, not
 * when its transaction commits: one holding seq 41 may commit after one holding 42, and a reader
 * that saw 42 and then asks for `seq > 42` never sees 41. As outbox readers on PostgreSQL do, the
 * follower remembers each seq it skipped (a gap below one it read) and asks for those again with
 * every read until GAP_WAIT_MS after the row above the gap was written: a late commit fills its
 * gap and is read then, once (it is no longer a gap); a gap still empty by then was a rolled-back
 * insert (the value is never used again) or a deleted row, and is forgotten. On SQLite (one
 * writer: seqs commit in order) gaps are only deleted rows.
 */
export class SeqFollower<Row extends { seq: number }> {
  /** Skipped seq → until when it is looked for. */
  private readonly gaps = new Map<number, number>();

  constructor(
    private readonly source: SeqSource<Row>,
    private cursor: number,
  ) {}

  /**
   * Rows not read before: those that filled a gap, then up to `limit` after the cursor.
   * `full`: the read after the cursor came back full (more may follow at once).
   */
  async next(limit: number, now: number): Promise<{ rows: Row[]; full: boolean }> {
    for (const [seq, until] of this.gaps) if (until < now) this.gaps.delete(seq);
    const late = this.gaps.size > 0 ? await this.source.at([...this.gaps.keys()]) : [];
    for (const row of late) this.gaps.delete(row.seq);
    const rows = await this.source.after(this.cursor, limit);
    for (const row of rows) {
      const until = this.source.timeOf(row) + GAP_WAIT_MS;
      if (until >= now) for (let seq = Math.max(this.cursor + 1, row.seq - MAX_GAPS); seq < row.seq; seq++) this.gaps.set(seq, until);
      this.cursor = row.seq;
    }
    // The oldest gaps give way first (a Map keeps the order they were found in).
    for (const seq of this.gaps.keys()) {
      if (this.gaps.size <= MAX_GAPS) break;
      this.gaps.delete(seq);
    }
    return { rows: [...late, ...rows], full: rows.length === limit };
  }
}
