/**
 * Talking to the console API as its clients do (fetch, cookies, CSRF header, bearer tokens),
 * with every JSON answer checked against the console OpenAPI document's schema for that
 * operation and status: a test fails on an answer the document does not describe.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020, type AnySchemaObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { OperatorContext } from '../../src/operator/context.js';
import { createOperator } from '../../src/operator/operators.js';
import {
  createProjectWithKeys,
  type HttpResult,
  type ProjectWithKeys,
  repoRoot,
  startTestPostern,
  type TestPostern,
  toResult,
} from './postern.js';
import { HANG_GUARD_MS } from './waiting.js';

export const API = '/console/api/v1';
export const consoleDoc = JSON.parse(
  readFileSync(path.join(repoRoot, 'src/console/openapi.json'), 'utf8'),
) as {
  paths: Record<
    string,
    Record<
      string,
      {
        operationId: string;
        responses: Record<
          string,
          { $ref?: string; content?: Record<string, { schema: AnySchemaObject }> }
        >;
      }
    >
  >;
  components: {
    responses: Record<string, { content?: Record<string, { schema: AnySchemaObject }> }>;
  };
};

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);
ajv.addKeyword({ keyword: 'x-error-codes', schemaType: 'object' });
ajv.addSchema(consoleDoc as unknown as AnySchemaObject, 'console');

/** A path of the document with every parameter filled with a well-formed id that exists nowhere. */
export function samplePath(template: string): string {
  const samples: Record<string, string> = {
    project_id: 'p.nosuchproject00000000',
    message_id: 'm.01nosuchmessage000000000000',
    key_id: 'k.nosuchkey0000000',
    account_id: 'pa.nosuchaccount000',
    webhook_id: 'wh.nosuchwebhook00000000',
    dkim_id: 'dk.nosuchdkimkey0000',
    domain: 'example.com',
    operator_id: 'op.nosuchoperator00',
    token_id: 'ot.nosuchtoken00000',
    delivery_id: 'we.nosuchdelivery00000',
    link_id: 'vl.nosuchlink0000000',
    email: 'nobody%40example.com',
    index: '0',
  };
  return template.replace(/\{([a-z_]+)\}/g, (_m, name: string) => samples[name]);
}

/** Every operation of the console document: its path template, method and operation object. */
export const documentedOperations = Object.entries(consoleDoc.paths).flatMap(([template, item]) =>
  Object.entries(item).map(([method, op]) => ({
    template,
    method: method.toUpperCase(),
    op: op as unknown as {
      operationId: string;
      security?: unknown[];
      'x-role'?: string;
      'x-before-password-change'?: boolean;
    },
  })),
);

const templates = Object.keys(consoleDoc.paths).map((template) => ({
  template,
  params: (template.match(/\{/g) ?? []).length,
  pattern: new RegExp(
    `^${API.replace(/\//g, '\\/')}${template.replace(/[.]/g, '\\.').replace(/\{[a-z_]+\}/g, '[^/]+')}$`,
  ),
}));

/** The document's path template a request path falls under (the most specific one). */
export function templateOf(pathname: string): string | null {
  const found = templates
    .filter((t) => t.pattern.test(pathname))
    .sort((a, b) => a.params - b.params);
  return found[0]?.template ?? null;
}

const validators = new Map<string, ValidateFunction | null>();

/** The schema of a documented answer, compiled; null for a documented answer with no JSON body; throws for an undocumented one. */
function responseValidator(
  method: string,
  template: string,
  status: number,
): ValidateFunction | null {
  const key = `${method} ${template} ${status}`;
  if (validators.has(key)) return validators.get(key)!;
  const op = consoleDoc.paths[template]?.[method.toLowerCase()];
  assert.ok(op, `${method} ${template} is not in the console document`);
  const pointer = `#/paths/${template.replace(/~/g, '~0').replace(/\//g, '~1')}/${method.toLowerCase()}/responses/${status}`;
  const response = op.responses[String(status)];
  assert.ok(
    response,
    `${method} ${template} answered ${status}, which the document does not list (${Object.keys(op.responses).join(', ')})`,
  );
  const target = response.$ref
    ? consoleDoc.components.responses[response.$ref.split('/').pop()!]
    : response;
  const content = target.content?.['application/json'];
  const validate = content
    ? ajv.compile({
        $ref: response.$ref
          ? `console${response.$ref}/content/application~1json/schema`
          : `console${pointer}/content/application~1json/schema`,
      })
    : null;
  validators.set(key, validate);
  return validate;
}

/** Asserts that `res` is an answer the document describes for this request, shape included. */
export function assertDocumented(method: string, pathname: string, res: HttpResult): void {
  const template = templateOf(pathname);
  assert.ok(template, `${pathname} matches no path of the console document`);
  const validate = responseValidator(method, template, res.status);
  if (validate === null) return;
  assert.match(
    res.headers.get('content-type') ?? '',
    /^application\/json/,
    `${method} ${pathname} ${res.status} is not JSON`,
  );
  assert.ok(
    validate(res.body),
    `${method} ${pathname} ${res.status} does not match its schema: ${ajv.errorsText(validate.errors)}\n${res.text.slice(0, 2000)}`,
  );
}

export interface CallOptions {
  json?: unknown;
  raw?: string;
  headers?: Record<string, string>;
  /** false: send no CSRF header; a string: send that one. */
  csrf?: false | string;
  /** Skip the schema check (answers that are not JSON: raw MIME, CSV, streams). */
  unchecked?: boolean;
}

/** A console API client: a signed-in session (cookie + CSRF token), a bearer token, or nobody. */
export class ConsoleClient {
  cookie: string | null = null;
  csrf: string | null = null;
  token: string | null = null;

  constructor(readonly base: string) {}

  static async signIn(base: string, email: string, password: string): Promise<ConsoleClient> {
    const client = new ConsoleClient(base);
    const res = await client.post('/session', { email, password });
    assert.equal(res.status, 201, res.text);
    return client;
  }

  withToken(token: string): ConsoleClient {
    const client = new ConsoleClient(this.base);
    client.token = token;
    return client;
  }

  async call(method: string, pathname: string, opts: CallOptions = {}): Promise<HttpResult> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.json !== undefined || opts.raw !== undefined)
      headers['content-type'] ??= 'application/json';
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (this.cookie) headers.cookie = this.cookie;
    if (this.csrf && method !== 'GET' && opts.csrf === undefined)
      headers['x-csrf-token'] = this.csrf;
    if (typeof opts.csrf === 'string') headers['x-csrf-token'] = opts.csrf;
    const res = await fetch(this.base + API + pathname, {
      method,
      headers,
      body: opts.raw ?? (opts.json === undefined ? undefined : JSON.stringify(opts.json)),
      signal: AbortSignal.timeout(HANG_GUARD_MS),
    });
    const result = await toResult(res);
    const body: unknown = result.body;
    const setCookie = res.headers.get('set-cookie');
    if (setCookie?.startsWith('postern_session=')) {
      const value = setCookie.slice('postern_session='.length).split(';')[0];
      this.cookie = value ? `postern_session=${value}` : null;
    }
    if (typeof (body as { csrf_token?: unknown } | undefined)?.csrf_token === 'string')
      this.csrf = (body as { csrf_token: string }).csrf_token;
    if (!opts.unchecked)
      assertDocumented(method, new URL(this.base + API + pathname).pathname, result);
    return result;
  }

  get(pathname: string, opts?: CallOptions) {
    return this.call('GET', pathname, opts);
  }
  post(pathname: string, json?: unknown, opts: CallOptions = {}) {
    return this.call('POST', pathname, { ...opts, json });
  }
  put(pathname: string, json?: unknown, opts: CallOptions = {}) {
    return this.call('PUT', pathname, { ...opts, json });
  }
  patch(pathname: string, json?: unknown, opts: CallOptions = {}) {
    return this.call('PATCH', pathname, { ...opts, json });
  }
  delete(pathname: string, opts?: CallOptions) {
    return this.call('DELETE', pathname, opts);
  }
}

export const PASSWORD = 'correct horse battery staple';

/** An operator with a known password (the tests sign in with it). */
export async function operatorAccount(
  ctx: OperatorContext,
  email: string,
  role: 'owner' | 'member',
  projects: string[] = [],
) {
  const created = await createOperator(ctx, { email, role, projects, password: PASSWORD });
  return { id: created.id, email, password: PASSWORD };
}

/** A JSON answer with exactly this status (the message shown on failure is the body). */
export function expectStatus(res: HttpResult, status: number): any {
  assert.equal(res.status, status, `${status} expected: ${res.text.slice(0, 1000)}`);
  return res.body;
}

/** An error answer: status, type and code. */
export function expectError(res: HttpResult, status: number, code: string): any {
  assert.equal(res.status, status, res.text);
  assert.equal(res.body?.error?.code, code, res.text);
  return res.body.error;
}

/** A live-updates stream, read as it arrives: events parsed, waited for by predicate. */
export class EventStream {
  readonly events: { event: string; data: any }[] = [];
  private readonly controller = new AbortController();
  private waiters: (() => void)[] = [];
  readonly opened: Promise<number>;

  constructor(client: ConsoleClient, query = '') {
    const headers: Record<string, string> = {};
    if (client.token) headers.authorization = `Bearer ${client.token}`;
    if (client.cookie) headers.cookie = client.cookie;
    this.opened = fetch(`${client.base}${API}/events/stream${query}`, {
      headers,
      signal: this.controller.signal,
    }).then((res) => {
      if (res.status === 200 && res.body) void this.read(res.body.getReader());
      return res.status;
    });
  }

  private async read(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data) this.events.push({ event, data: JSON.parse(data) });
          for (const w of this.waiters.splice(0)) w();
        }
      }
    } catch {
      // Aborted by close().
    }
  }

  /** The first event (from the start of the stream) that `match` accepts; `timeoutMs` is a hang guard. */
  async next(
    match: (e: { event: string; data: any }) => boolean,
    timeoutMs = HANG_GUARD_MS,
  ): Promise<{ event: string; data: any }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.find(match);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `no matching event within ${timeoutMs} ms; got ${JSON.stringify(this.events)}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.controller.abort();
  }
}

export interface ConsoleWorld {
  p: TestPostern;
  /** Two projects, each with a live and a test key and a provider; the member sees only `a`. */
  a: ProjectWithKeys;
  b: ProjectWithKeys;
  owner: ConsoleClient;
  member: ConsoleClient;
  memberId: string;
}

/** A server with a console listener, two projects, an owner and a member of the first, both signed in. */
export async function consoleWorld(
  opts: Parameters<typeof startTestPostern>[0] = {},
): Promise<ConsoleWorld> {
  const p = await startTestPostern({ ...opts, console: true });
  // A failure here stops the server it started: the caller never gets it to close, and the test file would hang.
  try {
    const a = await createProjectWithKeys(p.ctx, 'project a');
    const b = await createProjectWithKeys(p.ctx, 'project b');
    await operatorAccount(p.ctx, 'owner@example.com', 'owner');
    const memberId = (await operatorAccount(p.ctx, 'member@example.com', 'member', [a.project.id]))
      .id;
    return {
      p,
      a,
      b,
      owner: await ConsoleClient.signIn(p.console, 'owner@example.com', PASSWORD),
      member: await ConsoleClient.signIn(p.console, 'member@example.com', PASSWORD),
      memberId,
    };
  } catch (err) {
    await p.close();
    throw err;
  }
}
