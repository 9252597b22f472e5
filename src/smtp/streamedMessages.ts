import type { Readable } from 'node:stream';
import type { PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import { type BudgetLease, InflightBudget } from '../platform/inflightBudget.js';
import { holdIdleTimeout } from './heldSessions.js';
import type { LiveConnection } from './liveConnection.js';

/** Room for big messages streamed at once over every SMTP listener (`smtp.max_streamed_messages`; docs/smtp.md). */
export function createStreamBudget(smtp: PosternConfig['smtp']): InflightBudget {
  return new InflightBudget(
    smtp.max_streamed_messages,
    smtp.stream_wait_ms,
    (seconds) =>
      new ContractError('server_busy', {
        message: 'Too many large messages are being received at once; nothing was stored.',
        headers: { 'Retry-After': String(seconds) },
      }),
  );
}

export class SessionGone extends Error {
  constructor() {
    super('the client closed the connection while its message waited for room to stream');
  }
}

/** A lease in `streams`; while it waits the stream is paused (TCP holds the client back) and the idle timeout does not run. */
export async function roomToStream(
  streams: InflightBudget,
  stream: Readable,
  connectionOf: () => LiveConnection | undefined,
): Promise<BudgetLease> {
  const now = streams.tryAcquire(1);
  if (now) return now;
  if (stream.destroyed) throw new SessionGone();
  const connection = connectionOf();
  const resumeIdleTimeout = connection ? holdIdleTimeout(connection) : () => undefined;
  const gone = new AbortController();
  const onClose = () => gone.abort(new SessionGone());
  // The client leaving destroys the stream with an error: nothing else listens yet.
  const onError = () => undefined;
  stream.once('close', onClose);
  stream.on('error', onError);
  try {
    return await streams.acquire(1, gone.signal);
  } finally {
    stream.off('close', onClose);
    stream.off('error', onError);
    resumeIdleTimeout();
  }
}
