// Generates what is derived from the project's sources, so nothing is written twice by hand:
// first what lists providers, from their folders (scripts/generate-providers.mjs: the registry,
// the provider values of both OpenAPI documents, the web console's attach form), then the
// TypeScript types: src/contract/openapi.json → src/contract/types.gen.ts (the customer
// contract), src/console/openapi.json → src/console/types.gen.ts (the console API, with its
// operations' requests by operationId) and src/config/schema.json → src/config/types.gen.ts (the
// config file, after defaults).
// `npm run gen:types` rewrites them; with --check it changes nothing and fails when any is out of
// date (test/contract/openapi.test.ts runs it).
import { readFile, writeFile } from 'node:fs/promises';
import { compile } from 'json-schema-to-typescript';
import { DeclarationError, generateProviders } from './generate-providers.mjs';

const root = new URL('../', import.meta.url);
const options = (banner) => ({
  bannerComment: `/* Generated from ${banner} by scripts/generate-types.mjs. Do not edit. */`,
  additionalProperties: false,
  unreachableDefinitions: true,
  format: false,
  maxItems: -1,
  strictIndexSignatures: true,
});

function rewriteRefs(node) {
  if (Array.isArray(node)) return node.forEach(rewriteRefs);
  if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') node[k] = v.replace('#/components/schemas/', '#/definitions/');
      else rewriteRefs(v);
    }
  }
}

/** After defaults are applied every property that has a default is present: mark it required. */
function requireDefaulted(node) {
  if (Array.isArray(node)) return node.forEach(requireDefaulted);
  if (!node || typeof node !== 'object') return;
  if (node.properties) {
    const withDefault = Object.entries(node.properties).filter(([, s]) => s && 'default' in s).map(([k]) => k);
    node.required = [...new Set([...(node.required ?? []), ...withDefault])];
  }
  for (const v of Object.values(node)) requireDefaulted(v);
}

/** What an operation's request lacks (no path parameters, no query, no body): an empty object. */
const NOTHING = { tsType: 'Record<string, never>' };

/** Named parameters as one object schema, each with its own schema (as console/document.ts validates them). */
function parametersObject(params) {
  if (params.length === 0) return NOTHING;
  return {
    type: 'object',
    additionalProperties: false,
    required: params.filter((p) => p.required).map((p) => p.name),
    // A described reference would be inlined (its type's name lost): references keep their own.
    properties: Object.fromEntries(params.map((p) => [p.name, p.description && !p.schema.$ref ? { ...p.schema, description: p.description } : p.schema])),
  };
}

/**
 * Every operation's request, by operationId: whether it needs authentication, its path
 * parameters, its query and its JSON body (an optional body that is absent is checked as `{}`).
 */
function operationsSchema(doc) {
  const parameter = (p) => (p.$ref ? doc.components.parameters[p.$ref.replace('#/components/parameters/', '')] : p);
  const operations = {};
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      const params = (op.parameters ?? []).map(parameter);
      operations[op.operationId] = {
        type: 'object',
        additionalProperties: false,
        required: ['authenticated', 'params', 'query', 'body'],
        properties: {
          // As console/document.ts reads it: an operation's own `security: []` is its only way out.
          authenticated: { const: op.security === undefined || op.security.length > 0 },
          params: parametersObject(params.filter((p) => p.in === 'path')),
          query: parametersObject(params.filter((p) => p.in === 'query')),
          body: op.requestBody?.content['application/json']?.schema ?? NOTHING,
        },
      };
    }
  }
  return { type: 'object', additionalProperties: false, required: Object.keys(operations), properties: operations };
}

/**
 * The component schemas of an OpenAPI document (its text) as one JSON Schema, each a definition;
 * with `operations`, its operations' requests too (the definition `Operations`).
 */
async function openApiTypes(file, text, title, { operations = false } = {}) {
  const doc = JSON.parse(text);
  const definitions = structuredClone(doc.components.schemas);
  if (operations) {
    if ('Operations' in definitions) throw new Error(`${file}: a component schema is named Operations, the name of the generated operations' type`);
    definitions.Operations = structuredClone(operationsSchema(doc));
  }
  rewriteRefs(definitions);
  const schema = {
    title, type: 'object', definitions, additionalProperties: false,
    properties: Object.fromEntries(Object.keys(definitions).map((k) => [k, { $ref: `#/definitions/${k}` }])),
  };
  return compile(schema, title, options(file));
}

export async function generateTypes() {
  const providers = await generateProviders(root);
  const configSchema = JSON.parse(await readFile(new URL('src/config/schema.json', root), 'utf8'));
  delete configSchema.$id;
  requireDefaulted(configSchema);
  return {
    ...providers,
    'src/contract/types.gen.ts': await openApiTypes('src/contract/openapi.json', providers['src/contract/openapi.json'], 'Contract'),
    'src/console/types.gen.ts': await openApiTypes('src/console/openapi.json', providers['src/console/openapi.json'], 'ConsoleApi', { operations: true }),
    'src/config/types.gen.ts': await compile(configSchema, 'PosternConfig', options('src/config/schema.json')),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const check = process.argv.includes('--check');
  let stale = 0;
  let generated;
  try {
    generated = await generateTypes();
  } catch (err) {
    if (!(err instanceof DeclarationError)) throw err;
    console.error(err.message);
    process.exit(1);
  }
  for (const [file, text] of Object.entries(generated)) {
    if (check) {
      const current = await readFile(new URL(file, root), 'utf8').catch(() => '');
      if (current !== text) {
        console.error(`${file} is out of date: run npm run gen:types`);
        stale++;
      }
    } else {
      const current = await readFile(new URL(file, root), 'utf8').catch(() => '');
      if (current === text) continue;
      await writeFile(new URL(file, root), text);
      console.log('wrote', file);
    }
  }
  process.exitCode = stale ? 1 : 0;
}
