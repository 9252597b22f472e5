import type { ServerResponse } from 'node:http';
import type { ContractError } from '../contract/errors.js';

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return;
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(payload),
  });
  res.end(payload);
}

export function sendError(
  res: ServerResponse,
  err: ContractError,
  extraHeaders: Record<string, string> = {},
): void {
  sendJson(res, err.status, err.toEnvelope(), { ...err.headers, ...extraHeaders });
}
