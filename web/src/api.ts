/**
 * The console API, as the web app calls it: same-origin fetch with the session cookie, the
 * CSRF token on every state-changing call, and the API's error envelope turned into an error
 * whose message is the API's own. Types come from the API's OpenAPI document (generated into
 * src/console/types.gen.ts by `npm run gen:types`). Every answer tells the connection monitor
 * the server is reachable; a request that gets none tells it the opposite.
 */
import type * as Api from '../../src/console/types.gen.js';
import { markReachable, markUnreachable, setProbe } from './connection';

export type { Api };

/** Relative: the app is served at the console's root, possibly behind a path prefix. */
export const API_BASE = 'console/api/v1';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Api.ErrorDetail[] = [],
  ) {
    super(message);
  }
}

/** Refusals the app answers itself (the sign-in form over the screen, the password change): not shown as a screen's error. */
export const handledElsewhere = (err: unknown): boolean =>
  err instanceof ApiError &&
  [
    'session_expired',
    'unauthenticated',
    'invalid_operator_token',
    'password_change_required',
  ].includes(err.code);

let csrfToken: string | null = null;
let onSignedOut: ((code: string) => void) | null = null;
let onPasswordChangeRequired: (() => void) | null = null;

export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** Called when the API answers 401 (`session_expired`, `unauthenticated`: the session ended elsewhere). */
export function whenSignedOut(handler: (code: string) => void): void {
  onSignedOut = handler;
}

/** Called when the API refuses because the operator must change their (generated) password first. */
export function whenPasswordChangeRequired(handler: () => void): void {
  onPasswordChangeRequired = handler;
}

export async function api<T>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(`${API_BASE}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    markUnreachable();
    throw new ApiError(
      0,
      'network',
      'The console cannot reach the server. Check that Postern is running.',
    );
  }
  markReachable();
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const e = (json as Api.ErrorEnvelope | undefined)?.error;
    const err = new ApiError(
      res.status,
      e?.code ?? `http_${res.status}`,
      e?.message ?? `The server answered ${res.status}.`,
      e?.details ?? [],
    );
    // A refused sign-in is the sign-in form's own answer.
    if (res.status === 401 && !(method === 'POST' && path === '/session')) onSignedOut?.(err.code);
    if (err.code === 'password_change_required') onPasswordChangeRequired?.();
    throw err;
  }
  return json as T;
}

// While the server is unreachable, the connection monitor asks for the session until it answers.
setProbe(() =>
  api('GET', '/session').then(
    () => true,
    (err: unknown) => !(err instanceof ApiError && err.status === 0),
  ),
);

export const get = <T>(path: string) => api<T>('GET', path);
export const post = <T>(path: string, body?: unknown) => api<T>('POST', path, body);

/** A query string from the set values of `params` (arrays repeat the name). */
export function query(
  params: Record<string, string | string[] | number | undefined | null>,
): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) for (const x of v) q.append(k, x);
    else q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The send API's addresses, written into the page by the console listener (for the empty states' curl example). */
export function doors(): { production: string | null; sandbox: string | null } {
  const meta = document.querySelector('meta[name="postern-doors"]')?.getAttribute('content');
  try {
    return { production: null, sandbox: null, ...(meta ? (JSON.parse(meta) as object) : {}) };
  } catch {
    return { production: null, sandbox: null };
  }
}
