/* Generated from src/contract/openapi.json by scripts/generate-types.mjs. Do not edit. */

/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "IdempotencyKey".
 */
export type IdempotencyKey = string
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Email".
 */
export type Email = string
/**
 * One of: `email`; `Name <email>` (the name may be double-quoted); an object `{email, name?}`. Names and addresses never contain CR or LF. Any failure inside an address is reported at the address position as `<field>:invalid_address`.
 * 
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Address".
 */
export type Address = (string | {
email: Email
name?: string
})
/**
 * A single Address or a non-empty array of Address.
 * 
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Recipients".
 */
export type Recipients = (Address | [Address, ...(Address)[]])
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "ProviderSlug".
 */
export type ProviderSlug = ("smtp" | "provider-a-api" | "provider-a-smtp" | "provider-b-api" | "provider-b-smtp" | "provider-c-api" | "provider-c-smtp" | "provider-d-api" | "provider-d-smtp" | "provider-e-api" | "provider-e-smtp" | "provider-f-api" | "provider-f-smtp" | "provider-g-smtp")
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Strategy".
 */
export type Strategy = ("fallback" | "round-robin" | "random" | "free-first")
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Status".
 */
export type Status = ("queued" | "scheduled" | "paused" | "captured")
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "ErrorType".
 */
export type ErrorType = ("authentication_error" | "quota_error" | "permission_error" | "validation_error" | "rate_limit_error" | "api_error")

export interface Contract {
IdempotencyKey?: IdempotencyKey
Email?: Email
Address?: Address
Recipients?: Recipients
ProviderSlug?: ProviderSlug
Strategy?: Strategy
Routing?: Routing
ProviderOptions?: ProviderOptions
Attachment?: Attachment
Message?: Message
BatchRequest?: BatchRequest
Status?: Status
SendAccepted?: SendAccepted
BatchAccepted?: BatchAccepted
BatchResponse?: BatchResponse
ErrorType?: ErrorType
ErrorDetail?: ErrorDetail
ErrorEnvelope?: ErrorEnvelope
WebhookDelivery?: WebhookDelivery
}
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Routing".
 */
export interface Routing {
/**
 * a pin (one slug) or an ordered preference list without duplicates; every slug must be attached to the project
 */
provider?: (ProviderSlug | [ProviderSlug, ...(ProviderSlug)[]] | null)
strategy?: (Strategy | null)
}
/**
 * Allowlist of header-mappable provider options. Nothing is silently dropped.
 * 
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "ProviderOptions".
 */
export interface ProviderOptions {
"provider-a-api"?: {
/**
 * sent as a header over the provider's SMTP relay: no CR or LF
 */
configuration_set?: string
}
"provider-e-api"?: {
/**
 * sent as a header over the provider's SMTP relay: no CR or LF
 */
message_stream?: string
}
}
/**
 * Caps on decoded bytes: 10 MB (10485760) each (`attachments:too_large`), 25 MB (26214400) combined (`attachments:total_too_large`); inline images count toward both. `disposition: inline` requires `content_id`; a `content_id` without a disposition is inline.
 * 
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Attachment".
 */
export interface Attachment {
filename: string
/**
 * standard base64 of the bytes, without line breaks
 */
content: string
content_type?: (string | null)
content_id?: (string | null)
disposition?: ("attachment" | "inline" | null)
}
/**
 * Required: from, to, subject, and at least one of html/text (`body:required`). More than 50 recipients across to, cc and bcc gives `recipients:too_many`. Unknown keys give `body:unknown_key`. Nullable fields accept null as absent. CR or LF in any header-bound value (subject, display names, header values, filenames) is rejected, never folded. `scheduled_at` must be in the future (`scheduled_at:too_soon`) and at most 72 hours ahead (`scheduled_at:too_far`). When `paused` (or the project is paused) and `scheduled_at` are both given, the message is `paused`; once released it waits for `scheduled_at` if that is still in the future.
 * 
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "Message".
 */
export interface Message {
/**
 * a single address
 */
from: Address
to: Recipients
cc?: Recipients
bcc?: Recipients
reply_to?: Recipients
/**
 * at most 998 characters; no CR or LF
 */
subject: string
html?: (string | null)
text?: (string | null)
/**
 * Custom headers. Names are RFC 5322 field names; values at most 8192 characters without CR or LF. Reserved (case-insensitive): the names in `x-reserved-names` and any name starting with `X-Service-`. The header block they make, as composed with the message's other headers (non-ASCII values as RFC 2047 encoded words), is at most 1048576 bytes (`headers:too_large`).
 */
headers?: ({
[k: string]: string | undefined
} | null)
/**
 * @maxItems 20
 */
attachments?: (Attachment[] | null)
/**
 * @maxItems 10
 */
tags?: (string[] | null)
metadata?: ({
[k: string]: string | undefined
} | null)
category?: (string | null)
/**
 * an ISO 8601 / RFC 3339 instant with an offset: YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)
 */
scheduled_at?: (string | null)
paused?: (boolean | null)
routing?: (Routing | null)
provider_options?: (ProviderOptions | null)
}
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "BatchRequest".
 */
export interface BatchRequest {
/**
 * @minItems 1
 * @maxItems 100
 */
messages: [Message, ...(Message)[]]
}
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "SendAccepted".
 */
export interface SendAccepted {
id: string
status: Status
scheduled_at: (string | null)
paused: boolean
category: (string | null)
project_id: string
routing: {
provider: (string | string[] | null)
strategy: (string | null)
}
}
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "BatchAccepted".
 */
export interface BatchAccepted {
id: string
status: Status
}
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "BatchResponse".
 */
export interface BatchResponse {
data: (BatchAccepted | ErrorEnvelope)[]
}
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "ErrorEnvelope".
 */
export interface ErrorEnvelope {
error: {
type: ErrorType
code: string
message: string
/**
 * only on field-validation failures; the top-level code equals the first entry's code
 * 
 * @minItems 1
 */
details?: [ErrorDetail, ...(ErrorDetail)[]]
}
}
/**
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "ErrorDetail".
 */
export interface ErrorDetail {
field: string
code: string
}
/**
 * Outbound webhook body. Headers: X-Service-Signature `t=<unix>,v1=<hex hmac-sha256 of "<t>.<raw body>">`, X-Service-Event, X-Service-Delivery.
 * 
 * This interface was referenced by `Contract`'s JSON-Schema
 * via the `definition` "WebhookDelivery".
 */
export interface WebhookDelivery {
id: string
type: ("mail.accepted" | "mail.sent" | "mail.delivered" | "mail.bounced" | "mail.complained" | "mail.failed" | "mail.suppressed" | "webhook.test")
created_at: string
data: {
mail?: {
uid: string
subject: string
from: string
to: string[]
project: {
uid: string
name: string
}
tags: string[]
metadata: {
[k: string]: string | undefined
}
}
}
}
