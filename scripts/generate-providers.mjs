// Derives everything that lists providers from their folders (docs/architecture.md,
// "Providers"): each src/providers/<folder>/declaration.json (its slugs and the account fields
// each takes, from src/providers/accountFields.json) becomes
//   src/providers/registry.gen.ts          the registry: each folder's declaration.ts joined with its data
//   src/contract/openapi.json              ProviderSlug's enum, ProviderOptions' properties
//   src/console/openapi.json               ProviderSlug's enum, ProviderAttach's fields and description
//   web/src/screens/providerAccounts.gen.ts  the web console's attach form
// Only those values of the two documents are rewritten, in place; the rest of their text is
// left as it is. Run by scripts/generate-types.mjs (`npm run gen:types`), which then generates
// the documents' types, and checked for staleness by its --check.
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { Ajv2020 } from 'ajv/dist/2020.js';

const GENERATED = '/* Generated from src/providers/<folder>/declaration.json by scripts/generate-types.mjs. Do not edit. */';

/** A declaration that cannot be used: the file and what is wrong with it. */
export class DeclarationError extends Error {}

async function readJson(root, file) {
  return JSON.parse(await readFile(new URL(file, root), 'utf8'));
}

/** Every provider folder's declaration, validated, in a fixed order: the generic relay (`smtp`) first, then by slug. */
async function declarations(root, catalogue) {
  const validate = new Ajv2020({ allErrors: true, strict: false }).compile(await readJson(root, 'src/providers/declaration.schema.json'));
  const dir = new URL('src/providers/', root);
  const folders = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory() && existsSync(new URL(`${e.name}/declaration.json`, dir)));
  const seen = new Map();
  const providers = [];
  for (const { name: folder } of folders) {
    const file = `src/providers/${folder}/declaration.json`;
    const fail = (why) => {
      throw new DeclarationError(`${file}: ${why}`);
    };
    if (!/^[a-z][a-z0-9]*$/.test(folder)) fail('the folder name must be lower-case letters and digits (it names the provider in the registry)');
    if (!existsSync(new URL(`${folder}/declaration.ts`, dir))) fail('no declaration.ts beside it (its adapter, relay, feedback verifier and connection check)');
    const data = await readJson(root, file);
    if (!validate(data)) fail(validate.errors.map((e) => `${e.instancePath || '/'} ${e.message}`).join('; '));
    const slugs = [];
    for (const transport of ['api', 'smtp']) {
      const declared = data[transport];
      if (!declared) continue;
      if (seen.has(declared.slug)) fail(`slug ${declared.slug} is declared by ${seen.get(declared.slug)} too`);
      seen.set(declared.slug, file);
      const names = Object.keys(declared.account.properties);
      for (const name of names) if (!Object.hasOwn(catalogue, name)) fail(`${declared.slug} takes "${name}", which is not a field of src/providers/accountFields.json (${Object.keys(catalogue).join(', ')})`);
      for (const name of declared.account.required) if (!names.includes(name)) fail(`${declared.slug} requires "${name}" without listing it in its properties`);
      slugs.push({ transport, slug: declared.slug, title: declared.title, account: accountSchema(declared.account, catalogue), options: declared.options ?? null });
    }
    providers.push({ folder, slugs });
  }
  const orderKey = (p) => p.slugs.map((s) => (s.slug === 'smtp' ? '' : s.slug)).sort()[0];
  return providers.sort((a, b) => (orderKey(a) < orderKey(b) ? -1 : 1));
}

/** A slug's account fields as JSON Schema: the catalogue's type and limits, the slug's title and description, secrets writeOnly. */
function accountSchema(declared, catalogue) {
  const properties = {};
  for (const [name, own] of Object.entries(declared.properties)) {
    const field = catalogue[name];
    properties[name] = { ...field.schema, title: own.title ?? field.title, ...(own.description ? { description: own.description } : {}), ...(field.secret ? { writeOnly: true } : {}) };
  }
  return { type: 'object', required: declared.required, properties };
}

/* ------------------------------------------------------------------------------------------ */
/* A JSON value replaced in place: the document's other text (its escapes, its layout) stays.  */

/** Where each value of a JSON text starts and ends, by its path of keys. */
function valueSpan(text, path) {
  let i = 0;
  const ws = () => {
    while (/\s/.test(text[i])) i++;
  };
  const string = () => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i));
  };
  // Skips a value, or descends into it while it lies on the path; returns the span of the path's value.
  const value = (depth) => {
    ws();
    const start = i;
    if (depth === path.length) {
      skip();
      return [start, i];
    }
    if (text[i] !== '{') throw new Error(`no object at ${path.slice(0, depth).join('.')}`);
    i++;
    for (;;) {
      ws();
      if (text[i] === '}') throw new Error(`no ${path.slice(0, depth + 1).join('.')} in the document`);
      const key = string();
      ws();
      i++; // :
      if (key === path[depth]) return value(depth + 1);
      skip();
      ws();
      if (text[i] === ',') i++;
    }
  };
  const skip = () => {
    ws();
    const c = text[i];
    if (c === '"') return string();
    if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      i++;
      for (;;) {
        ws();
        if (text[i] === close) return i++;
        if (c === '{') {
          string();
          ws();
          i++;
        }
        skip();
        ws();
        if (text[i] === ',') i++;
      }
    }
    while (i < text.length && !/[\s,}\]]/.test(text[i])) i++;
  };
  return value(0);
}

/** The text with the value at `path` replaced by `replacement`, laid out as `JSON.stringify(…, null, 2)` at that depth. */
function replaceValue(text, path, replacement) {
  const [start, end] = valueSpan(text, path);
  // Continuation lines take the indentation of the line the value starts on (its key's).
  const indent = /^[ \t]*/.exec(text.slice(text.lastIndexOf('\n', start - 1) + 1))[0];
  return text.slice(0, start) + JSON.stringify(replacement, null, 2).replace(/\n/g, `\n${indent}`) + text.slice(end);
}

function currentValue(text, path) {
  const [start, end] = valueSpan(text, path);
  return JSON.parse(text.slice(start, end));
}

/* ------------------------------------------------------------------------------------------ */

/** The send API contract's order: per provider, its API slug then its SMTP slug. */
const contractOrder = (providers) => providers.flatMap((p) => p.slugs);
/** The console's order (the attach form's list): every SMTP relay, then every API. */
const consoleOrder = (providers) => ['smtp', 'api'].flatMap((t) => providers.flatMap((p) => p.slugs.filter((s) => s.transport === t)));

function contractDocument(text, providers) {
  text = replaceValue(text, ['components', 'schemas', 'ProviderSlug', 'enum'], contractOrder(providers).map((s) => s.slug));
  const options = Object.fromEntries(
    contractOrder(providers)
      .filter((s) => s.options)
      .map((s) => [
        s.slug,
        {
          type: 'object',
          additionalProperties: false,
          'x-error-codes': { additionalProperties: 'provider_options:unknown_option', type: 'provider_options:invalid_type' },
          properties: s.options,
        },
      ]),
  );
  return replaceValue(text, ['components', 'schemas', 'ProviderOptions', 'properties'], options);
}

function consoleDocument(text, providers, catalogue) {
  text = replaceValue(text, ['components', 'schemas', 'ProviderSlug', 'enum'], consoleOrder(providers).map((s) => s.slug));
  const path = ['components', 'schemas', 'ProviderAttach'];
  const current = currentValue(text, [...path, 'properties']);
  const rest = Object.fromEntries(Object.entries(current).filter(([k]) => k !== 'slug' && !Object.hasOwn(catalogue, k)));
  const properties = { slug: current.slug, ...Object.fromEntries(Object.entries(catalogue).map(([name, field]) => [name, field.schema])), ...rest };
  text = replaceValue(text, [...path, 'properties'], properties);
  const fields = contractOrder(providers).map((s) => `${s.slug}: ${Object.keys(s.account.properties).map((f) => (s.account.required.includes(f) ? `${f}*` : f)).join(', ')}`);
  return replaceValue(text, [...path, 'description'], `The account fields each slug takes (* required; the same as \`postern provider attach --help\`). ${fields.join('; ')}.`);
}

const literal = (value) => JSON.stringify(value);

function registryModule(providers) {
  const lines = [
    GENERATED,
    "import * as declaration from './declaration.js';",
    ...[...providers].sort((a, b) => (a.folder < b.folder ? -1 : 1)).map((p) => `import { provider as ${p.folder}Provider } from './${p.folder}/declaration.js';`),
    '',
    '/** Every provider of this build: its folder\'s declaration.ts joined with its declaration.json (the generic relay first, then by slug). */',
    'export const DECLARED_PROVIDERS: readonly declaration.DeclaredProvider[] = [',
  ];
  for (const p of providers) {
    lines.push(`  declaration.declareProvider(${literal(p.folder)}, ${p.folder}Provider, {`);
    for (const s of p.slugs) lines.push(`    ${s.transport}: { slug: ${literal(s.slug)}, title: ${literal(s.title)}, account: ${literal(s.account)} },`);
    lines.push('  }),');
  }
  lines.push('];', '');
  return lines.join('\n');
}

function webModule(providers) {
  return [
    GENERATED,
    "import type { Api } from '../api';",
    '',
    '/** An account field as the attach form shows it: JSON Schema (the provider\'s declaration joined with src/providers/accountFields.json). */',
    'export interface AccountField {',
    "  type?: 'string' | 'integer';",
    '  enum?: string[];',
    '  minLength?: number;',
    '  maxLength?: number;',
    '  minimum?: number;',
    '  maximum?: number;',
    '  title: string;',
    '  description?: string;',
    '  writeOnly?: boolean;',
    '}',
    '',
    'export interface SlugAccount {',
    '  slug: Api.ProviderSlug;',
    '  title: string;',
    "  account: { type: 'object'; required: string[]; properties: Record<string, AccountField> };",
    '}',
    '',
    '/** Every slug the console attaches, SMTP relays first, with the account fields each takes. */',
    'export const PROVIDER_ACCOUNTS: readonly SlugAccount[] = [',
    ...consoleOrder(providers).map((s) => `  { slug: ${literal(s.slug)}, title: ${literal(s.title)}, account: ${literal(s.account)} },`),
    '];',
    '',
  ].join('\n');
}

/**
 * The files derived from the provider folders under `root` (a URL ending in `/`), by path:
 * the two OpenAPI documents with their provider values replaced, and the generated modules.
 */
export async function generateProviders(root) {
  const catalogue = (await readJson(root, 'src/providers/accountFields.json')).fields;
  const providers = await declarations(root, catalogue);
  return {
    'src/providers/registry.gen.ts': registryModule(providers),
    'src/contract/openapi.json': contractDocument(await readFile(new URL('src/contract/openapi.json', root), 'utf8'), providers),
    'src/console/openapi.json': consoleDocument(await readFile(new URL('src/console/openapi.json', root), 'utf8'), providers, catalogue),
    'web/src/screens/providerAccounts.gen.ts': webModule(providers),
  };
}
