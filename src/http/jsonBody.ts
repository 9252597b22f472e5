import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ContractError, type ErrorDetail } from '../contract/errors.js';
import { shapeLimitDetail } from '../contract/shapeLimitDetail.js';
import type { InflightBudget } from '../platform/inflightBudget.js';
import { JsonShapeScanner, type ShapeLimits, type ShapeProblem, scanToEnd } from './jsonShape.js';
import { readRequestBody } from './requestBody.js';

export type BodyEnvelope = 'message' | 'batch' | 'console';

/** Far beyond any body the contract accepts, and small enough that JSON.parse and the validators stay in the low milliseconds. */
export const BODY_SHAPE_LIMITS: Record<BodyEnvelope, ShapeLimits> = {
  message: { maxDepth: 32, maxKeys: 1000, maxItems: 1000, maxValues: 5_000 },
  batch: { maxDepth: 32, maxKeys: 1000, maxItems: 1000, maxValues: 50_000 },
  // A bulk action's 10,000 message ids (one more is its own 422).
  console: { maxDepth: 32, maxKeys: 1000, maxItems: 10_001, maxValues: 50_000 },
};

export interface JsonBody {
  value: unknown;
  /** Every U+FFFD in `value` marks bytes the client sent that are not text (the body held none of its own). */
  undecodable: boolean;
}

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
      return new ContractError('body:too_large', {
        message: `The request body holds more than ${limits.maxValues} JSON keys and values.`,
      });
    case 'depth':
      return new ContractError('body:invalid_json', {
        message: `The request body nests deeper than ${limits.maxDepth} levels.`,
      });
    default:
      return ContractError.validation([
        envelope === 'console'
          ? consoleShapeDetail(problem.path, problem.kind)
          : shapeLimitDetail(problem.path, problem.kind, envelope),
      ]);
  }
}

function consoleShapeDetail(path: string[], kind: 'keys' | 'items'): ErrorDetail {
  const suffix = kind === 'keys' ? 'too_many_keys' : 'too_many';
  return path.length === 0
    ? { field: 'body', code: `body:${suffix}` }
    : { field: path.join('.'), code: `${path[0]}:${suffix}` };
}

/** The answers to what the contract leaves open (docs/http-api.md); non-UTF-8 bytes are never silently replaced. */
export async function readJsonBody(
  req: IncomingMessage,
  res: ServerResponse,
  opts: { limit: number; budget: InflightBudget; envelope: BodyEnvelope },
): Promise<JsonBody> {
  if (!isJsonContentType(req.headers['content-type']))
    throw new ContractError('body:unsupported_media_type');
  const scanner = new JsonShapeScanner(BODY_SHAPE_LIMITS[opts.envelope]);
  const refusal = (buf: Buffer, received: number) => {
    const problem = scanner.feed(buf, received);
    return problem && shapeError(problem, opts.envelope);
  };
  const raw = await readRequestBody(req, res, opts.limit, opts.budget, refusal);
  if (raw.length === 0)
    throw new ContractError('body:invalid_json', { message: 'The request body is empty.' });
  const problem = await scanToEnd(scanner, raw);
  if (problem) throw shapeError(problem, opts.envelope);
  const undecodable = !isUtf8(raw);
  const text = raw.toString('utf8');
  if (undecodable && (raw.includes(REPLACEMENT_BYTES) || REPLACEMENT_ESCAPE.test(text))) {
    throw new ContractError('body:invalid_json', {
      message: 'The request body is not valid UTF-8.',
    });
  }
  try {
    return { value: JSON.parse(text) as unknown, undecodable };
  } catch {
    throw new ContractError('body:invalid_json', {
      message: undecodable ? 'The request body is not valid UTF-8 JSON.' : undefined,
    });
  }
}
