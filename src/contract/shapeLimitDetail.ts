import type { ErrorDetail } from './errors.js';
import { schemas } from './openapiSchemas.js';

const MESSAGE_FIELDS = new Set(Object.keys(schemas.Message.properties as object));
const RECIPIENT_FIELDS = new Set(['to', 'cc', 'bcc']);

/**
 * The detail for a body refused before parsing because one of its objects has too many keys or
 * one of its arrays too many items (src/http/jsonShape.ts), named as the schema would name it:
 * a container under an unknown key is that unknown key; an over-long `to`/`cc`/`bcc` is
 * `recipients:too_many`; otherwise `<field>:too_many_keys` / `<field>:too_many` at the
 * container. In a batch, each element of `messages` is a Message of its own (`messages.3.…`).
 */
export function shapeLimitDetail(
  path: string[],
  kind: 'keys' | 'items',
  envelope: 'message' | 'batch',
): ErrorDetail {
  if (envelope === 'batch' && !(path[0] === 'messages' && path.length >= 2)) {
    if (path.length === 0)
      return { field: 'body', code: kind === 'keys' ? 'body:too_many_keys' : 'body:invalid_type' };
    if (path[0] !== 'messages') return { field: path[0], code: 'body:unknown_key' };
    return {
      field: 'messages',
      code: kind === 'items' ? 'messages:too_many' : 'messages:invalid_type',
    };
  }
  const prefix = envelope === 'batch' ? path.slice(0, 2) : [];
  const inMessage = path.slice(prefix.length);
  const field = (parts: string[]) => [...prefix, ...parts].join('.') || 'body';
  if (inMessage.length === 0)
    return { field: field([]), code: kind === 'keys' ? 'body:too_many_keys' : 'body:invalid_type' };
  const top = inMessage[0];
  if (!MESSAGE_FIELDS.has(top)) return { field: field([top]), code: 'body:unknown_key' };
  if (kind === 'items' && RECIPIENT_FIELDS.has(top))
    return { field: field(['recipients']), code: 'recipients:too_many' };
  return {
    field: field(inMessage),
    code: `${top}:${kind === 'keys' ? 'too_many_keys' : 'too_many'}`,
  };
}
