import type {
  OperatorBookkeeping,
  OperatorBookkeepingResult,
  OperatorResultOf,
} from '../commit/operatorBookkeeping.js';
import { applyOperatorBookkeeping } from '../commit/operatorBookkeeping.js';
import type { Queries } from '../store/queries.js';
import type { OperatorContext, OperatorWriter } from './context.js';
import { OperatorError } from './errors.js';

/** A write's outcome as the operator layer answers it: its result, or the refusal as an OperatorError. */
function settle<W extends OperatorBookkeeping>(
  outcome: OperatorBookkeepingResult,
): OperatorResultOf<W> {
  if ('refused' in outcome) throw new OperatorError(outcome.refused.code, outcome.refused.message);
  // The writer answers a write of type K with that type's result.
  return outcome.value as OperatorResultOf<W>;
}

/** The server's: each write sent to the index writer thread (`send`), one transaction there. */
export function writerThrough(
  send: (work: OperatorBookkeeping) => Promise<OperatorBookkeepingResult>,
): OperatorWriter {
  return { write: async <W extends OperatorBookkeeping>(work: W) => settle<W>(await send(work)) };
}

/** The CLI's: each write one transaction on its own connection. */
export function directWriter(store: Queries): OperatorWriter {
  return {
    write: async <W extends OperatorBookkeeping>(work: W) =>
      settle<W>(await store.transaction((tx) => applyOperatorBookkeeping(tx, work))),
  };
}

/** Runs one write where this context writes: the writer thread in the server, else `ctx.store`. */
export function write<W extends OperatorBookkeeping>(
  ctx: OperatorContext,
  work: W,
): Promise<OperatorResultOf<W>> {
  return (ctx.writer ?? directWriter(ctx.store)).write(work);
}
