import { Ajv, type AnySchemaObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { parseMailbox } from './address.js';
import openapi from './openapi.json' with { type: 'json' };

/**
 * Request validators compiled from the OpenAPI document, so the document and the behaviour
 * cannot drift.
 */
export const openapiDocument = openapi as unknown as {
  components: { schemas: Record<string, AnySchemaObject> };
} & Record<string, unknown>;

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
export const ajv = new Ajv({ allErrors: true, verbose: true, strict: false, unicodeRegExp: true });
addFormats(ajv);
ajv.addFormat('mailbox', { type: 'string', validate: (s: string) => parseMailbox(s) !== null });
ajv.addKeyword({ keyword: 'x-error-codes', schemaType: 'object' });
ajv.addKeyword({ keyword: 'x-element-validated-separately', schemaType: 'boolean' });
ajv.addKeyword({
  keyword: 'x-reserved-names',
  type: 'string',
  schemaType: 'object',
  errors: true,
  validate: (spec: { names: string[]; prefixes: string[] }, name: string) => {
    const lower = name.toLowerCase();
    return !spec.names.includes(lower) && !spec.prefixes.some((p) => lower.startsWith(p));
  },
});
ajv.addSchema(openapi as AnySchemaObject, 'openapi');

export function compiled(name: string): ValidateFunction {
  const fn = ajv.getSchema(`openapi#/components/schemas/${name}`);
  if (!fn) throw new Error(`schema ${name} missing from openapi.json`);
  return fn;
}

export const schemas = openapiDocument.components.schemas;
