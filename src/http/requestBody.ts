import type { IncomingMessage, ServerResponse } from 'node:http';
import { ContractError } from '../contract/errors.js';
import { InflightBudget, type BudgetLease } from '../platform/inflightBudget.js';

/** The client closed the connection before its request body was complete: nobody to answer. */
export class ClientGone extends Error {
  constructor() {
    super('the client closed the connection before the request body was complete');
  }
}

/**
 * Looks at a body as it arrives (the bytes up to `received` are in `buf`, which is the whole
 * body's buffer): a refusal stops the reading at once.
 */
export type BodyInspector = (buf: Buffer, received: number) => Error | null;

/** What a body without Content-Length first takes of the budget; it takes more as it grows. */
const FIRST_CHUNKED_LEASE = 64 * 1024;

/**
 * The memory budget of HTTP request bodies in flight (`http.max_inflight_body_bytes`, shared by
 * every HTTP listener): a request holds its body's bytes from before it is read until its
 * response is done, since the body, its text and its parsed form live that long. One that waits
 * past `waitMs` is refused `503 server_busy` with `Retry-After`.
 */
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
  return new ContractError('body:too_large', { message: `The request body exceeds ${limit} bytes.` });
}

/** A lease once `bytes` fit in the budget; withdrawn (ClientGone) if the client goes away first. */
async function waitForBudget(req: IncomingMessage, budget: InflightBudget, bytes: number): Promise<BudgetLease> {
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

/**
 * Reads a request body whole into one Buffer, raw bytes (their decoding is the caller's).
 * Over `limit` bytes → 413 `body:too_large`, from Content-Length before reading when declared.
 * The body's bytes are held in `budget` from before the first byte is read until `res` is done:
 * a request that does not fit waits there (503 `server_busy` after the budget's wait). A body
 * with Content-Length is read straight into one buffer of that size (no chunk list, no copy at
 * the end), and shown to `inspect` as it arrives; one without takes the budget in steps as it
 * arrives, and is the caller's to look at once read.
 */
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
  const lease = budget.tryAcquire(declared ?? Math.min(limit, FIRST_CHUNKED_LEASE)) ?? (await waitForBudget(req, budget, declared ?? Math.min(limit, FIRST_CHUNKED_LEASE)));
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
