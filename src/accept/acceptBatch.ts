import type { Clock } from '../clock.js';
import { ContractError, type ErrorEnvelope } from '../contract/errors.js';
import type { BatchAccepted } from '../contract/types.gen.js';
import type { AuthContext } from '../policy/apiKeys.js';
import type { AcceptPipeline } from './acceptMessage.js';
import { checkMessageBody } from './messageRules.js';
import { toOutgoingMessage, type OutgoingMessage } from './outgoingMessage.js';

/**
 * A batch is N independent sends: `data[i]` answers `messages[i]` with BatchAccepted or that
 * element's own error envelope. Valid elements are written concurrently and committed in
 * request order (see AcceptPipeline.acceptMany).
 */
export async function acceptBatch(pipeline: AcceptPipeline, auth: AuthContext, messages: unknown[], clock: Clock): Promise<(BatchAccepted | ErrorEnvelope)[]> {
  const now = clock.now();
  const checked = messages.map((body) => checkMessageBody(body, now));
  const valid: OutgoingMessage[] = [];
  for (const c of checked) if (c.ok) valid.push(toOutgoingMessage(c.message));
  const outcomes = await pipeline.acceptMany(auth, valid, { source: 'http', idempotencyKey: null });
  let next = 0;
  return checked.map((c) => {
    if (!c.ok) return ContractError.validation(c.details).toEnvelope();
    const outcome = outcomes[next++];
    return outcome instanceof ContractError ? outcome.toEnvelope() : { id: outcome.id, status: outcome.status };
  });
}
