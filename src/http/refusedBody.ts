import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ContractError } from '../contract/errors.js';
import { sendError } from './respond.js';

/**
 * How much of a refused request's unread body is read and thrown away before its connection
 * is closed (`http.refused_body_drain_bytes` / `refused_body_drain_ms`).
 */
export interface DrainBounds {
  bytes: number;
  ms: number;
}

/** Answers a refusal (a ContractError) on `res`, whatever is left of its request's body. */
export type Refuse = (res: ServerResponse, err: ContractError, headers?: Record<string, string>) => void;

/** Connections already draining (a second refusal on one request adds nothing). */
const draining = new WeakSet<Socket>();

/**
 * Whether a request has a body still (partly) unread. A request without one is complete as
 * soon as its headers are, though `req.complete` turns true only after the handler started.
 */
function bodyUnread(req: IncomingMessage): boolean {
  if (req.complete) return false;
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/**
 * The answer to a request refused before its body was read whole (a bad key, a body over its
 * limit, a shape refused mid-body, an unknown path): a client still sending cannot read an
 * answer if the connection is simply closed, because the bytes it sends next meet a closed
 * socket, which resets the connection and throws away the answer before the client reads it
 * (Python's http.client reads only once it has sent everything: a broken pipe; Node's fetch
 * too, often). So, as nginx's lingering close: the answer goes out with `Connection: close`,
 * the rest of the body is read and discarded, and the connection is closed once the body has
 * all arrived; at most `bounds.bytes` more bytes and `bounds.ms`, after which it is cut as
 * before (a body whose Content-Length is larger than the bound is not drained at all). A slow
 * body still ends at `bounds.ms`.
 */
export function refusalAnswer(bounds: DrainBounds): Refuse {
  return (res, err, headers = {}) => {
    const req = res.req;
    if (!bodyUnread(req)) return sendError(res, err, headers);
    drain(req, bounds);
    sendError(res, err, { ...headers, Connection: 'close' });
  };
}

/**
 * Whether a request came on a connection whose refusal said `Connection: close`: a client
 * that sends one anyway (pipelined behind the refused body) is not served; its connection is
 * closed.
 */
export function closingConnection(req: IncomingMessage): boolean {
  return draining.has(req.socket);
}

function drain(req: IncomingMessage, bounds: DrainBounds): void {
  const socket = req.socket;
  if (draining.has(socket)) return;
  const declared = req.headers['content-length'] === undefined ? null : Number(req.headers['content-length']);
  // Not drained: Node closes the socket as soon as the `Connection: close` answer is out.
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
