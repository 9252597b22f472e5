import type { MessageAction } from '../store/messageActions.js';
import type { MessageFilter } from '../store/messageSearch.js';

/** What a bulk message action applies to: a list of ids, or what a filter matches. */
export type BulkTarget = { ids: readonly string[] } | { filter: MessageFilter };

/** What a bulk action will touch: counts, and the candidates as JSON chunks of MessageKey ready for the writer. */
export interface BulkCandidates {
  matched: number;
  skipped: number;
  not_found: number;
  chunks: string[];
}

/** Where the server reads a bulk action's candidates (operator/bulkReader.ts); absent (the CLI): on the operator's own connection. */
export interface OperatorReader {
  bulkCandidates(
    action: MessageAction,
    target: BulkTarget,
    scope: readonly string[] | null,
    now: number,
  ): Promise<BulkCandidates>;
}
