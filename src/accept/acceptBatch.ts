import type { Clock } from '../clock.js';
import { ContractError, type ErrorEnvelope } from '../contract/errors.js';
import type { BatchAccepted } from '../contract/types.gen.js';
import type { AuthContext } from '../policy/apiKeys.js';
import type { AcceptPipeline } from './acceptMessage.js';
import { checkMessageBody } from './messageRules.js';
import { toOutgoingMessage } from './outgoingMessage.js';

/**
 * A batch is N independent sends: `data[i]` answers `messages[i]` with BatchAccepted or that
 * element's own error envelope. Elements run concurrently and share group commits.
 */
export async function acceptBatch(pipeline: AcceptPipeline, auth: AuthContext, messages: unknown[], clock: Clock): Promise<(BatchAccepted | ErrorEnvelope)[]> {
  const now = clock.now();
  return Promise.all(
    messages.map(async (body): Promise<BatchAccepted | ErrorEnvelope> => {
      const check = checkMessageBody(body, now);
      if (!check.ok) return ContractError.validation(check.details).toEnvelope();
      try {
        const accepted = await pipeline.accept(auth, toOutgoingMessage(check.message), { source: 'http', idempotencyKey: null });
        return { id: accepted.id, status: accepted.status };
      } catch (err) {
        if (err instanceof ContractError) return err.toEnvelope();
        return new ContractError('server_error').toEnvelope();
      }
    }),
  );
}
