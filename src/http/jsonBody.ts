import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ContractError, type ErrorDetail } from '../contract/errors.js';
import { shapeLimitDetail } from '../contract/validators.js';
import type { InflightBudget } from '../platform/inflightBudget.js';
import { JsonShapeScanner, scanToEnd, type ShapeLimits, type ShapeProblem } from './jsonShape.js';
import { readRequestBody } from './requestBody.js';

/** What a body is: one Message (`/v1/send`), a batch envelope of up to 100, or a console API request. */
export type BodyEnvelope = 'message' | 'batch' | 'console';

/**
 * Far beyond any body the contract accepts (a Message nests 4 deep; its largest lists are 50
 * recipients, 20 attachments, 100 batch elements), and small enough that JSON.parse and the
 * validators stay in the low milliseconds on whatever passes.
 */
export const BODY_SHAPE_LIMITS: Record<BodyEnvelope, ShapeLimits> = {
  message: { maxDepth: 32, maxKeys: 1000, maxItems: 1000, maxValues: 5_000 },
  batch: { maxDepth: 32, maxKeys: 1000, maxItems: 1000, maxValues: 50_000 },
  // The console's largest list: a bulk action's 10,000 message ids (one more is its own 422).
  console: { maxDepth: 32, maxKeys: 1000, maxItems: 10_001, maxValues: 50_000 },
};

export interface JsonBody {
  value: unknown;
  /**
   * The body was not valid UTF-8: each undecodable sequence became U+FFFD, and the body held no
   * U+FFFD of its own, so every U+FFFD in `value` marks bytes the client sent that are not text
   * (refused with the field's `invalid_value`, see messageRules).
   */
  undecodable: boolean;
}

/** The media type every customer endpoint takes (parameters such as charset are allowed). */
function isJsonContentType(header: string | undefined): boolean {
  if (!header) return false;
  return header.split(';')[0].trim().toLowerCase() === 'application/json';
}

const REPLACEMENT_BYTES = Buffer.from('\uFFFD', 'utf8');
const REPLACEMENT_ESCAPE = /\\u[fF]{3}[dD]/;

function shapeError(problem: ShapeProblem, envelope: BodyEnvelope): ContractError {
  const limits = BODY_SHAPE_LIMITS[envelope];
  switch (problem.kind) {
    case 'values':
      return new ContractError('body:too_large', { message: `The request body holds more than ${limits.maxValues} JSON keys and values.` });
    case 'depth':
      return new ContractError('body:invalid_json', { message: `The request body nests deeper than ${limits.maxDepth} levels.` });
    default:
      return ContractError.validation([envelope === 'console' ? consoleShapeDetail(problem.path, problem.kind) : shapeLimitDetail(problem.path, problem.kind, envelope)]);
  }
}

/** A console body past a shape limit: the field at fault, `<top field>:too_many` or `:too_many_keys`. */
function consoleShapeDetail(path: string[], kind: 'keys' | 'items'): ErrorDetail {
  const suffix = kind === 'keys' ? 'too_many_keys' : 'too_many';
  return path.length === 0 ? { field: 'body', code: `body:${suffix}` } : { field: path.join('.'), code: `${path[0]}:${suffix}` };
}

/**
 * Reads and parses a JSON request body, answering what the contract leaves open: wrong
 * Content-Type → 415 `body:unsupported_media_type`; over `limit` bytes → 413 `body:too_large`;
 * empty or unparseable → 400 `body:invalid_json`; past the shape limits (BODY_SHAPE_LIMITS,
 * checked as the body arrives, before JSON.parse builds anything) → 422 at the container, 400
 * for nesting, 413 for the count of values. Bytes that are not UTF-8 are never silently replaced: they are marked for
 * the field rules (JsonBody.undecodable), or, where the body also holds a real U+FFFD so the
 * two cannot be told apart, the body is refused (400 `body:invalid_json`). A non-object body is
 * the caller's 422.
 */
export async function readJsonBody(
  req: IncomingMessage,
  res: ServerResponse,
  opts: { limit: number; budget: InflightBudget; envelope: BodyEnvelope },
): Promise<JsonBody> {
  if (!isJsonContentType(req.headers['content-type'])) throw new ContractError('body:unsupported_media_type');
  // The shape is checked as the body arrives: a hostile one is refused before it is read whole.
  const scanner = new JsonShapeScanner(BODY_SHAPE_LIMITS[opts.envelope]);
  const refusal = (buf: Buffer, received: number) => {
    const problem = scanner.feed(buf, received);
    return problem && shapeError(problem, opts.envelope);
  };
  const raw = await readRequestBody(req, res, opts.limit, opts.budget, refusal);
  if (raw.length === 0) throw new ContractError('body:invalid_json', { message: 'The request body is empty.' });
  const problem = await scanToEnd(scanner, raw);
  if (problem) throw shapeError(problem, opts.envelope);
  const undecodable = !isUtf8(raw);
  const text = raw.toString('utf8');
  if (undecodable && (raw.includes(REPLACEMENT_BYTES) || REPLACEMENT_ESCAPE.test(text))) {
    throw new ContractError('body:invalid_json', { message: 'The request body is not valid UTF-8.' });
  }
  try {
    return { value: JSON.parse(text) as unknown, undecodable };
  } catch {
    throw new ContractError('body:invalid_json', { message: undecodable ? 'The request body is not valid UTF-8 JSON.' : undefined });
  }
}
