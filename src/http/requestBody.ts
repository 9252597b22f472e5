import type { IncomingMessage, ServerResponse } from 'node:http';
import { ContractError } from '../contract/errors.js';
import { type BudgetLease, InflightBudget } from '../platform/inflightBudget.js';

export class ClientGone extends Error {
  constructor() {
    super('the client closed the connection before the request body was complete');
  }
}

/** `buf` is the whole body's buffer, filled up to `received`; a refusal stops the reading at once. */
export type BodyInspector = (buf: Buffer, received: number) => Error | null;

const FIRST_CHUNKED_LEASE = 64 * 1024;

/** Held from before the body is read until the response is done, since the body and its parsed forms live that long. */
export function createBodyBudget(capacityBytes: number, waitMs: number): InflightBudget {
  return new InflightBudget(
    capacityBytes,
    waitMs,
    (seconds) =>
      new ContractError('server_busy', {
        message: `Too many large request bodies are being processed; nothing was accepted. Retry in ${seconds} second${seconds === 1 ? '' : 's'}.`,
        headers: { 'Retry-After': String(seconds) },
      }),
  );
}

function tooLarge(limit: number): ContractError {
  return new ContractError('body:too_large', {
    message: `The request body exceeds ${limit} bytes.`,
  });
}

async function waitForBudget(
  req: IncomingMessage,
  budget: InflightBudget,
  bytes: number,
): Promise<BudgetLease> {
  const gone = new AbortController();
  const onClose = () => {
    if (!req.complete) gone.abort(new ClientGone());
  };
  req.once('close', onClose);
  try {
    return await budget.acquire(bytes, gone.signal);
  } finally {
    req.off('close', onClose);
  }
}

/** Within `limit` (413) and the budget; with Content-Length read straight into one buffer (no chunk list, no copy), shown to `inspect`. */
export async function readRequestBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  budget: InflightBudget,
  inspect?: BodyInspector,
): Promise<Buffer> {
  const header = req.headers['content-length'];
  const declared = header === undefined ? null : Number(header);
  if (declared !== null && declared > limit) throw tooLarge(limit);
  if (req.destroyed && !req.complete) throw new ClientGone();
  const lease =
    budget.tryAcquire(declared ?? Math.min(limit, FIRST_CHUNKED_LEASE)) ??
    (await waitForBudget(req, budget, declared ?? Math.min(limit, FIRST_CHUNKED_LEASE)));
  if (res.destroyed || (req.destroyed && !req.complete)) {
    lease.release();
    throw new ClientGone();
  }
  res.once('close', () => lease.release());
  if (declared === 0) return Buffer.alloc(0);
  return new Promise<Buffer>((resolve, reject) => {
    const whole = declared === null ? null : Buffer.allocUnsafe(declared);
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (err: Error | null, body?: Buffer) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
      if (err) reject(err);
      else resolve(body!);
    };
    const onData = (chunk: Buffer) => {
      if (whole) {
        // The HTTP parser never passes more than Content-Length.
        chunk.copy(whole, received);
        received += chunk.length;
        const refusal = inspect?.(whole, received);
        if (refusal) stop(refusal);
        return;
      }
      received += chunk.length;
      if (received > limit) return stop(tooLarge(limit));
      chunks.push(chunk);
      if (received > lease.amount) {
        req.pause();
        lease.growTo(Math.min(limit, Math.max(received, lease.amount * 2))).then(
          () => req.resume(),
          (err: Error) => stop(err),
        );
      }
    };
    const onEnd = () => stop(null, whole ?? Buffer.concat(chunks, received));
    const onGone = () => {
      if (!req.complete) stop(new ClientGone());
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onGone);
    req.once('close', onGone);
  });
}
