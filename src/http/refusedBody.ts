import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ContractError } from '../contract/errors.js';
import { sendError } from './respond.js';

export interface DrainBounds {
  bytes: number;
  ms: number;
}

export type Refuse = (
  res: ServerResponse,
  err: ContractError,
  headers?: Record<string, string>,
) => void;

/** A second refusal on one request adds nothing. */
const draining = new WeakSet<Socket>();

/** `req.complete` turns true only after the handler started, though a bodiless request is complete with its headers. */
function bodyUnread(req: IncomingMessage): boolean {
  if (req.complete) return false;
  return (
    req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0
  );
}

/**
 * Answers a refusal before the body was read whole, as nginx's lingering close: `Connection: close`, the rest
 * drained within `bounds`, then closed. Closing at once makes a still-sending client reset and lose the answer.
 */
export function refusalAnswer(bounds: DrainBounds): Refuse {
  return (res, err, headers = {}) => {
    const req = res.req;
    if (!bodyUnread(req)) return sendError(res, err, headers);
    drain(req, bounds);
    sendError(res, err, { ...headers, Connection: 'close' });
  };
}

/** A client that sends anyway after a `Connection: close` refusal is not served. */
export function closingConnection(req: IncomingMessage): boolean {
  return draining.has(req.socket);
}

function drain(req: IncomingMessage, bounds: DrainBounds): void {
  const socket = req.socket;
  if (draining.has(socket)) return;
  const declared =
    req.headers['content-length'] === undefined ? null : Number(req.headers['content-length']);
  if (bounds.ms <= 0 || (declared !== null && declared > bounds.bytes)) return;
  draining.add(socket);
  let answered = false;
  let bodyDone = false;
  let drained = 0;
  const closeSoon = socket.destroySoon.bind(socket);
  const cut = () => socket.destroy();
  const timer = setTimeout(cut, bounds.ms);
  timer.unref();
  const onData = (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > bounds.bytes) cut();
  };
  // Every byte the client sends has been read: closing now sends no reset.
  const onEnd = () => {
    bodyDone = true;
    if (answered) closeSoon();
  };
  // Node calls destroySoon() once a `Connection: close` answer is written: held until the body is in.
  socket.destroySoon = () => {
    answered = true;
    if (bodyDone) closeSoon();
  };
  socket.once('close', () => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', onEnd);
  });
  // A reader stopped on its refusal may have paused the request: read on, keeping nothing.
  req.on('data', onData);
  req.once('end', onEnd);
  req.resume();
}
