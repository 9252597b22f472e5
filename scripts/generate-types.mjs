// Generates what is derived from the project's sources, so nothing is written twice by hand:
// first what lists providers, from their folders (scripts/generate-providers.mjs: the registry,
// the provider values of both OpenAPI documents, the web console's attach form), then the
// TypeScript types: src/contract/openapi.json → src/contract/types.gen.ts (the customer
// contract), src/console/openapi.json → src/console/types.gen.ts (the console API) and
// src/config/schema.json → src/config/types.gen.ts (the config file, after defaults).
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

/** The component schemas of an OpenAPI document (its text) as one JSON Schema, each a definition. */
async function openApiTypes(file, text, title) {
  const doc = JSON.parse(text);
  const definitions = structuredClone(doc.components.schemas);
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
    'src/console/types.gen.ts': await openApiTypes('src/console/openapi.json', providers['src/console/openapi.json'], 'ConsoleApi'),
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
