/**
 * The error-code catalogue: every error either door can give, with its HTTP status and type.
 * The SMTP door maps the same entries to reply codes, so both doors say the same thing.
 */
import type { ErrorDetail, ErrorEnvelope, ErrorType } from './types.gen.js';

export type { ErrorDetail, ErrorEnvelope, ErrorType };

/** `details` is never empty: the top-level code is its first entry's. */
export type Details = [ErrorDetail, ...ErrorDetail[]];

export function asDetails(list: ErrorDetail[], fallback: ErrorDetail): Details {
  return list.length > 0 ? (list as Details) : [fallback];
}

/** At most this many details in one refusal; its message says how many more failed. */
export const MAX_DETAILS = 20;
/** Parts of a field path (a client's key names) longer than this are shown cut, ending in "…". */
export const MAX_FIELD_PART = 64;

/** `field` with each over-long part cut (never inside a surrogate pair). */
export function shortField(field: string): string {
  if (field.length <= MAX_FIELD_PART) return field;
  return field
    .split('.')
    .map((part) => {
      if (part.length <= MAX_FIELD_PART) return part;
      const last = part.charCodeAt(MAX_FIELD_PART - 1);
      const cut = last >= 0xd800 && last <= 0xdbff ? MAX_FIELD_PART - 1 : MAX_FIELD_PART;
      return `${part.slice(0, cut)}…`;
    })
    .join('.');
}

interface CatalogueEntry {
  status: number;
  type: ErrorType;
  message: string;
}

export const errorCatalogue = {
  missing_api_key: {
    status: 401,
    type: 'authentication_error',
    message: 'Provide your API key as "Authorization: Bearer <key>".',
  },
  invalid_api_key: {
    status: 401,
    type: 'authentication_error',
    message: 'The API key matches no active key.',
  },
  key_expired: { status: 401, type: 'authentication_error', message: 'The API key has expired.' },
  mode_mismatch: {
    status: 401,
    type: 'authentication_error',
    message: 'Live keys work only on the production host and test keys only on the sandbox host.',
  },
  monthly_quota_exceeded: {
    status: 402,
    type: 'quota_error',
    message: "The plan's monthly message quota is spent.",
  },
  throughput_quota_exceeded: {
    status: 402,
    type: 'quota_error',
    message: "The plan's monthly data volume is spent.",
  },
  no_providers_configured: {
    status: 422,
    type: 'permission_error',
    message: 'The project has no attached provider.',
  },
  routing_provider_not_configured: {
    status: 422,
    type: 'validation_error',
    message: 'A pinned provider is not attached to the project.',
  },
  suppressed_recipient: {
    status: 422,
    type: 'validation_error',
    message: "A recipient is on the project's suppression list.",
  },
  'sender_domain:limit_reached': {
    status: 422,
    type: 'validation_error',
    message: "The sender domain is new and the plan's sender-domain cap is reached.",
  },
  'category:limit_reached': {
    status: 422,
    type: 'validation_error',
    message: 'The project already has the maximum number of distinct categories.',
  },
  'idempotency_key:invalid': {
    status: 422,
    type: 'validation_error',
    message: 'Idempotency-Key may contain only A-Z, a-z, 0-9, "_" and "-".',
  },
  'idempotency_key:invalid_length': {
    status: 422,
    type: 'validation_error',
    message: 'Idempotency-Key must be 12 to 40 characters long.',
  },
  validation_failed: {
    status: 422,
    type: 'validation_error',
    message: 'The request body is invalid.',
  },
  'body:invalid_json': {
    status: 400,
    type: 'validation_error',
    message: 'The request body is not valid JSON.',
  },
  'body:too_large': {
    status: 413,
    type: 'validation_error',
    message: 'The request body exceeds the size limit.',
  },
  'body:unsupported_media_type': {
    status: 415,
    type: 'validation_error',
    message: 'Send the request body as application/json.',
  },
  rate_limited: {
    status: 429,
    type: 'rate_limit_error',
    message: 'Too many requests; retry after the number of seconds in Retry-After.',
  },
  daily_send_cap_exceeded: {
    status: 429,
    type: 'rate_limit_error',
    message: "The plan's daily send ceiling is reached; it resets at 00:00 UTC.",
  },
  server_error: {
    status: 500,
    type: 'api_error',
    message:
      'The message could not be stored; nothing was accepted. Retry with the same Idempotency-Key.',
  },
  storage_low: {
    status: 503,
    type: 'api_error',
    message:
      'The server is low on disk space and accepts no new mail until space is freed; nothing was accepted. Retry after the number of seconds in Retry-After.',
  },
  server_busy: {
    status: 503,
    type: 'api_error',
    message:
      'The server is at its connection or memory limit; nothing was accepted. Retry after the number of seconds in Retry-After.',
  },
  // Provider feedback endpoints (not customer-facing; see docs/delivery.md, "Provider feedback").
  'feedback:unauthenticated': {
    status: 401,
    type: 'authentication_error',
    message: 'The notification is not authenticated for this provider account.',
  },
  'feedback:stale': {
    status: 401,
    type: 'authentication_error',
    message: 'The notification timestamp is outside the accepted tolerance.',
  },
  'feedback:replayed': {
    status: 406,
    type: 'authentication_error',
    message: 'The notification token was already used.',
  },
  'feedback:malformed': {
    status: 400,
    type: 'validation_error',
    message: 'The notification body is not in the provider format.',
  },
  // The plain-HTTP listener beside the HTTPS ones (http.redirect_plain; docs/tls.md).
  https_required: {
    status: 403,
    type: 'permission_error',
    message:
      'This address is plain HTTP and processes nothing: send the request over HTTPS. An API key sent here travelled unencrypted: consider it exposed and rotate it.',
  },
  not_found: { status: 404, type: 'api_error', message: 'No such endpoint.' },
  method_not_allowed: {
    status: 405,
    type: 'api_error',
    message: 'Method not allowed on this endpoint.',
  },
  // The console API (src/console; docs/console.md, "The console API").
  unauthenticated: {
    status: 401,
    type: 'authentication_error',
    message:
      'Sign in (POST /console/api/v1/session), or send an operator API token as "Authorization: Bearer pso_…".',
  },
  session_expired: {
    status: 401,
    type: 'authentication_error',
    message: 'The console session has expired; sign in again.',
  },
  invalid_operator_token: {
    status: 401,
    type: 'authentication_error',
    message: 'The operator API token matches no active token.',
  },
  invalid_credentials: {
    status: 401,
    type: 'authentication_error',
    message: 'The email or password is wrong.',
  },
  csrf_token_invalid: {
    status: 403,
    type: 'permission_error',
    message:
      'A state-changing request of a console session needs its CSRF token in the X-CSRF-Token header.',
  },
  forbidden: { status: 403, type: 'permission_error', message: 'Your role does not allow this.' },
  password_change_required: {
    status: 403,
    type: 'permission_error',
    message:
      'Your password was generated for you: change it first (PUT /console/api/v1/session/password). Until then only that and signing out are allowed.',
  },
  conflict: { status: 409, type: 'api_error', message: 'The current state does not allow this.' },
  sign_in_throttled: {
    status: 429,
    type: 'rate_limit_error',
    message: 'Too many failed sign-ins; retry after the number of seconds in Retry-After.',
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof errorCatalogue;

/** A refusal travelling through the pipeline; each door renders it in its own protocol. */
export class ContractError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly details?: Details;
  readonly headers?: Record<string, string>;

  constructor(
    code: ErrorCode,
    opts: {
      message?: string;
      details?: Details;
      headers?: Record<string, string>;
      displayCode?: string;
    } = {},
  ) {
    const entry: CatalogueEntry = errorCatalogue[code];
    super(opts.message ?? entry.message);
    this.status = entry.status;
    this.type = entry.type;
    this.code = opts.displayCode ?? code;
    this.details = opts.details;
    this.headers = opts.headers;
  }

  /**
   * A field-validation failure: the top-level code is the first detail's code. The first
   * MAX_DETAILS details are listed (field paths cut to MAX_FIELD_PART per part); the message
   * counts the rest, so a body with a million bad keys gets a small answer.
   */
  static validation(details: Details, message?: string): ContractError {
    const shown = details
      .slice(0, MAX_DETAILS)
      .map((d) => ({ field: shortField(d.field), code: d.code })) as Details;
    const more = details.length - shown.length;
    const listed = shown
      .map((d) => `${d.field} (${d.code.slice(d.code.indexOf(':') + 1)})`)
      .join(', ');
    const summary =
      message ?? `Invalid request: ${listed}${more > 0 ? `, and ${more} more not listed` : ''}.`;
    return new ContractError('validation_failed', {
      details: shown,
      message: summary,
      displayCode: shown[0].code,
    });
  }

  toEnvelope(): ErrorEnvelope {
    const error: ErrorEnvelope['error'] = {
      type: this.type,
      code: this.code,
      message: this.message,
    };
    if (this.details) error.details = this.details;
    return { error };
  }
}
