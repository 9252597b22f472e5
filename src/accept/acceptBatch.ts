import type { Clock } from '../clock.js';
import { ContractError, type ErrorEnvelope } from '../contract/errors.js';
import type { BatchAccepted } from '../contract/types.gen.js';
import { TimeSlices } from '../platform/timeSlices.js';
import type { AuthContext } from '../policy/apiKeys.js';
import type { AcceptPipeline } from './acceptMessage.js';
import { checkMessageBody, type MessageCheck } from './messageRules.js';
import { type OutgoingMessage, toOutgoingMessage } from './outgoingMessage.js';

const CHECK_SLICE_MS = 2;

/**
 * A batch is N independent sends: `data[i]` answers `messages[i]` with BatchAccepted or that
 * element's own error envelope. Valid elements are written concurrently and committed in
 * request order (see AcceptPipeline.acceptMany).
 */
export async function acceptBatch(
  pipeline: AcceptPipeline,
  auth: AuthContext,
  messages: unknown[],
  clock: Clock,
  opts: { undecodable?: boolean } = {},
): Promise<(BatchAccepted | ErrorEnvelope)[]> {
  const now = clock.now();
  // A hundred elements full of errors take a while to judge: other clients get turns meanwhile.
  const slices = new TimeSlices(CHECK_SLICE_MS);
  const checked: MessageCheck[] = [];
  for (const body of messages) {
    if (slices.spent) await slices.next();
    checked.push(checkMessageBody(body, now, opts));
  }
  const valid: OutgoingMessage[] = [];
  for (const c of checked) if (c.ok) valid.push(toOutgoingMessage(c.message));
  const outcomes = await pipeline.acceptMany(auth, valid, { source: 'http', idempotencyKey: null });
  let next = 0;
  return checked.map((c) => {
    if (!c.ok) return ContractError.validation(c.details).toEnvelope();
    const outcome = outcomes[next++];
    return outcome instanceof ContractError
      ? outcome.toEnvelope()
      : { id: outcome.id, status: outcome.status };
  });
}
