import type { IncomingMessage } from 'node:http';
import { json } from '@polka/parse';
import { ContractError } from '../contract/errors.js';

/** The media type every customer endpoint takes (parameters such as charset are allowed). */
function isJsonContentType(header: string | undefined): boolean {
  if (!header) return false;
  return header.split(';')[0].trim().toLowerCase() === 'application/json';
}

/**
 * Reads and parses a JSON request body with @polka/parse. Answers the cases the contract leaves
 * open: wrong Content-Type → 415 `body:unsupported_media_type`, over `limit` bytes → 413
 * `body:too_large` (refused from Content-Length before reading when it is declared), empty or
 * unparseable → 400 `body:invalid_json`. A non-object body is the caller's 422.
 */
export function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  if (!isJsonContentType(req.headers['content-type'])) {
    return Promise.reject(new ContractError('body:unsupported_media_type'));
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(new ContractError('body:too_large', { message: `The request body exceeds ${limit} bytes.` }));
  }
  // @polka/parse matches the media type case-sensitively; it has been checked above, so
  // normalise it rather than let "Application/JSON" be skipped as an empty body.
  req.headers['content-type'] = req.headers['content-type']!.toLowerCase();
  const parse = json({ limit });
  return new Promise((resolve, reject) => {
    let settled = false;
    const target = req as IncomingMessage & { body?: unknown; _body?: boolean };
    // The middleware may report an overflow once per further chunk: the first outcome wins.
    void parse(target as never, undefined as never, (err?: unknown) => {
      if (settled) return;
      settled = true;
      if (err) {
        const status = (err as { status?: number }).status;
        if (status === 413) reject(new ContractError('body:too_large', { message: `The request body exceeds ${limit} bytes.` }));
        else if (status === 422) reject(new ContractError('body:invalid_json'));
        else reject(err);
        return;
      }
      if (!target._body) reject(new ContractError('body:invalid_json', { message: 'The request body is empty.' }));
      else resolve(target.body);
    });
  });
}
