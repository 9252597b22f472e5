/* Generated from src/console/openapi.json by scripts/generate-types.mjs. Do not edit. */

/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ErrorType".
 */
export type ErrorType = ("authentication_error" | "quota_error" | "permission_error" | "validation_error" | "rate_limit_error" | "api_error")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProjectId".
 */
export type ProjectId = string
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageId".
 */
export type MessageId = string
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageStatus".
 */
export type MessageStatus = ("queued" | "scheduled" | "paused" | "captured" | "sending" | "sent" | "delivered" | "bounced" | "complained" | "failed" | "suppressed" | "cancelled")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Environment".
 */
export type Environment = ("production" | "sandbox")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Email".
 */
export type Email = string
/**
 * ISO 8601: a date (YYYY-MM-DD, midnight UTC) or an instant with an offset; in the future
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Expiry".
 */
export type Expiry = string
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "OperatorRole".
 */
export type OperatorRole = ("owner" | "member")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Operator".
 */
export type Operator = OperatorFields
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "OperatorCreated".
 */
export type OperatorCreated = (OperatorFields & {
/**
 * the generated one-time password; shown only here
 */
password?: string
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "TokenState".
 */
export type TokenState = ("active" | "expired" | "revoked")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Token".
 */
export type Token = TokenFields
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "TokenCreated".
 */
export type TokenCreated = (TokenFields & {
/**
 * shown only here; only its SHA-256 is stored
 */
token: string
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Strategy".
 */
export type Strategy = ("fallback" | "round-robin" | "random" | "free-first")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Project".
 */
export type Project = ProjectFields
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProjectDetail".
 */
export type ProjectDetail = (ProjectFields & {
limits: PlanLimits
usage: {
month: {
period: string
messages: number
bytes: number
overage_messages: number
}
day: {
period: string
messages: number
}
sender_domains: string[]
categories: number
}
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProjectPauseResult".
 */
export type ProjectPauseResult = (ProjectFields & {
/**
 * resume: the messages the pause alone was holding, now on their way
 */
released?: number
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Key".
 */
export type Key = KeyFields
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "KeyCreated".
 */
export type KeyCreated = (KeyFields & {
/**
 * shown only here
 */
key: string
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProviderSlug".
 */
export type ProviderSlug = ("smtp" | "provider-a-smtp" | "provider-b-smtp" | "provider-c-smtp" | "provider-d-smtp" | "provider-e-smtp" | "provider-f-smtp" | "provider-g-smtp" | "provider-a-api" | "provider-b-api" | "provider-c-api" | "provider-d-api" | "provider-e-api" | "provider-f-api")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageSummary".
 */
export type MessageSummary = MessageSummaryFields
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "TimelineEntry".
 */
export type TimelineEntry = ({
kind: "event"
at: string
type: string
detail: {

}
} | {
kind: "attempt"
at: string
finished_at: string
duration_ms: number
provider: (string | null)
provider_account_id: (string | null)
outcome: ("sent" | "temporary" | "account" | "permanent")
reply: (string | null)
provider_message_id: (string | null)
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageDetail".
 */
export type MessageDetail = (MessageSummaryFields & {
hold_reason: ("request" | "project" | null)
cc: string[]
bcc: string[]
metadata: {
[k: string]: string | undefined
}
routing: unknown
provider_options?: unknown
idempotency_key?: (string | null)
size_bytes?: number
attempts: number
next_attempt_at: (string | null)
provider: (string | null)
provider_message_id: (string | null)
last_error: (string | null)
updated_at: string
recipients: RecipientState[]
timeline: TimelineEntry[]
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "BulkAction".
 */
export type BulkAction = ("release" | "cancel" | "retry")
/**
 * exactly one of ids, filter; at most 10,000 messages
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "BulkRequest".
 */
export type BulkRequest = ({
action: BulkAction
/**
 * @minItems 1
 * @maxItems 10000
 */
ids?: [MessageId, ...(MessageId)[]]
filter?: MessageFilter
/**
 * true: change nothing, only count what the action would touch (`matched`, `skipped`, `not_found`; `changed` is 0): the console's confirmation names that count
 */
dry_run?: boolean
} & BulkRequest1)
export type BulkRequest1 = {
[k: string]: unknown | undefined
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MailEventType".
 */
export type MailEventType = ("mail.accepted" | "mail.sent" | "mail.delivered" | "mail.bounced" | "mail.complained" | "mail.failed" | "mail.suppressed")
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Webhook".
 */
export type Webhook = WebhookFields
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookCreated".
 */
export type WebhookCreated = (WebhookFields & {
/**
 * the signing secret; shown only here
 */
secret: string
})
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookEnabled".
 */
export type WebhookEnabled = (WebhookFields & {
resumed_deliveries: number
})
/**
 * up: a beat within 3 heartbeats; missing: no beat since, not stopped; stopped: stopped gracefully
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "NodeState".
 */
export type NodeState = ("up" | "missing" | "stopped")

export interface ConsoleApi {
ErrorType?: ErrorType
ErrorDetail?: ErrorDetail
ErrorEnvelope?: ErrorEnvelope
ProjectId?: ProjectId
MessageId?: MessageId
MessageStatus?: MessageStatus
Environment?: Environment
Email?: Email
Expiry?: Expiry
OperatorRole?: OperatorRole
OperatorFields?: OperatorFields
Operator?: Operator
SignIn?: SignIn
Session?: Session
PasswordChange?: PasswordChange
PasswordChanged?: PasswordChanged
OperatorCreate?: OperatorCreate
OperatorCreated?: OperatorCreated
OperatorUpdate?: OperatorUpdate
PasswordResetOptions?: PasswordResetOptions
PasswordReset?: PasswordReset
OperatorRemoved?: OperatorRemoved
OperatorList?: OperatorList
TokenState?: TokenState
TokenFields?: TokenFields
Token?: Token
TokenCreate?: TokenCreate
TokenCreated?: TokenCreated
TokenList?: TokenList
AuditEntry?: AuditEntry
AuditPage?: AuditPage
Strategy?: Strategy
ProjectFields?: ProjectFields
Project?: Project
ProjectList?: ProjectList
ProjectCreate?: ProjectCreate
PlanLimits?: PlanLimits
ProjectDetail?: ProjectDetail
ProjectPauseResult?: ProjectPauseResult
PlanChange?: PlanChange
StrategyChange?: StrategyChange
ProjectDeleted?: ProjectDeleted
KeyFields?: KeyFields
Key?: Key
KeyList?: KeyList
KeyCreate?: KeyCreate
KeyCreated?: KeyCreated
KeyRotate?: KeyRotate
KeyRotated?: KeyRotated
ProviderSlug?: ProviderSlug
ProviderAccount?: ProviderAccount
ProviderList?: ProviderList
ProviderAttach?: ProviderAttach
ProviderUpdate?: ProviderUpdate
ProviderDetached?: ProviderDetached
ConnectionCheck?: ConnectionCheck
MessageSummaryFields?: MessageSummaryFields
MessageSummary?: MessageSummary
MessagePage?: MessagePage
TimelineEntry?: TimelineEntry
RecipientState?: RecipientState
MessageDetail?: MessageDetail
Attachment?: Attachment
MessageContent?: MessageContent
MessageFilter?: MessageFilter
BulkAction?: BulkAction
BulkRequest?: BulkRequest
BulkResult?: BulkResult
ViewerLinkCreate?: ViewerLinkCreate
ViewerLink?: ViewerLink
MessageDeleted?: MessageDeleted
Suppression?: Suppression
SuppressionPage?: SuppressionPage
SuppressionAdd?: SuppressionAdd
SuppressionAdded?: SuppressionAdded
SuppressionRemoved?: SuppressionRemoved
DkimKey?: DkimKey
SendingDomainList?: SendingDomainList
SendingDomain?: SendingDomain
DomainCheck?: DomainCheck
DomainRecord?: DomainRecord
DomainRequiredBy?: DomainRequiredBy
DkimList?: DkimList
DkimAdd?: DkimAdd
DkimRemoved?: DkimRemoved
MailEventType?: MailEventType
WebhookFields?: WebhookFields
Webhook?: Webhook
WebhookList?: WebhookList
WebhookAdd?: WebhookAdd
WebhookCreated?: WebhookCreated
WebhookEnabled?: WebhookEnabled
WebhookRemoved?: WebhookRemoved
WebhookSecret?: WebhookSecret
WebhookTestResult?: WebhookTestResult
WebhookAttempt?: WebhookAttempt
WebhookAttemptPage?: WebhookAttemptPage
Overview?: Overview
NodeState?: NodeState
NodeListener?: NodeListener
Node?: Node
NodeList?: NodeList
Plan?: Plan
PlanList?: PlanList
WebhookDelivery?: WebhookDelivery
WebhookRedelivery?: WebhookRedelivery
ViewerLinkRecord?: ViewerLinkRecord
ViewerLinkList?: ViewerLinkList
ViewerLinkRevoked?: ViewerLinkRevoked
Operations?: Operations
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ErrorDetail".
 */
export interface ErrorDetail {
field: string
/**
 * `<field>:<reason>`
 */
code: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ErrorEnvelope".
 */
export interface ErrorEnvelope {
error: {
type: ErrorType
code: string
message: string
/**
 * only on validation failures (422); the top-level code is the first entry's
 * 
 * @minItems 1
 */
details?: [ErrorDetail, ...(ErrorDetail)[]]
}
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "OperatorFields".
 */
export interface OperatorFields {
id: string
email: string
role: OperatorRole
/**
 * the projects a member may see (empty for an owner, who sees all)
 */
projects: ProjectId[]
created_at: string
password_changed_at: string
/**
 * the password was generated (`operator create` or a reset without a chosen password): until the operator changes it (`PUT /session/password`), their session or token may do nothing but that, read `GET /session` and sign out (`403 password_change_required`)
 */
must_change_password: boolean
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "SignIn".
 */
export interface SignIn {
email: string
password: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Session".
 */
export interface Session {
operator: Operator
via: ("session" | "token")
/**
 * send as `X-CSRF-Token` on every state-changing request of a cookie session; null with a bearer token (none needed)
 */
csrf_token: (string | null)
/**
 * a session unused this long ends; null with a bearer token
 */
idle_timeout_seconds: (number | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "PasswordChange".
 */
export interface PasswordChange {
current_password: string
new_password: string
/**
 * true: your API tokens are revoked too (a password that leaked); absent or false: they keep working
 */
revoke_tokens?: boolean
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "PasswordChanged".
 */
export interface PasswordChanged {
/**
 * your other sessions, now ended
 */
sessions_ended: number
/**
 * your API tokens revoked (0 unless revoke_tokens)
 */
tokens_revoked: number
/**
 * your API tokens that still work (see GET /tokens)
 */
tokens_active: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "OperatorCreate".
 */
export interface OperatorCreate {
email: Email
role: OperatorRole
/**
 * @maxItems 1000
 */
projects?: ProjectId[]
/**
 * absent: a one-time password is generated and returned once
 */
password?: string
}
/**
 * at least one of role, projects
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "OperatorUpdate".
 */
export interface OperatorUpdate {
role?: OperatorRole
/**
 * @maxItems 1000
 */
projects?: ProjectId[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "PasswordResetOptions".
 */
export interface PasswordResetOptions {
/**
 * true: the operator's API tokens keep working (a forgotten password); absent or false: they are revoked
 */
keep_tokens?: boolean
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "PasswordReset".
 */
export interface PasswordReset {
id: string
email: string
/**
 * the new one-time password; shown only here
 */
password: string
/**
 * the operator's sessions, now ended
 */
sessions_ended: number
/**
 * the operator's API tokens revoked (0 with keep_tokens)
 */
tokens_revoked: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "OperatorRemoved".
 */
export interface OperatorRemoved {
id: string
removed: true
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "OperatorList".
 */
export interface OperatorList {
operators: Operator[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "TokenFields".
 */
export interface TokenFields {
id: string
operator_id: string
name: string
/**
 * `pso_…` and the last 4 characters
 */
hint: string
created_at: string
expires_at: (string | null)
last_used_at: (string | null)
revoked_at: (string | null)
state: TokenState
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "TokenCreate".
 */
export interface TokenCreate {
name: string
expires_at?: Expiry
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "TokenList".
 */
export interface TokenList {
tokens: Token[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "AuditEntry".
 */
export interface AuditEntry {
seq: number
at: string
/**
 * an operator id, or `cli`
 */
actor: string
actor_email: (string | null)
action: string
target: (string | null)
client_ip: (string | null)
details: ({

} | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "AuditPage".
 */
export interface AuditPage {
entries: AuditEntry[]
next_cursor: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProjectFields".
 */
export interface ProjectFields {
id: ProjectId
name: string
plan: string
paused: boolean
strategy: Strategy
created_at: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProjectList".
 */
export interface ProjectList {
projects: Project[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProjectCreate".
 */
export interface ProjectCreate {
name: string
plan?: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "PlanLimits".
 */
export interface PlanLimits {
monthly_messages: number
overage: boolean
daily_messages: (number | null)
monthly_bytes: number
bytes_grace_percent: number
sender_domains: (number | null)
[k: string]: unknown | undefined
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "PlanChange".
 */
export interface PlanChange {
plan: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "StrategyChange".
 */
export interface StrategyChange {
strategy: Strategy
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProjectDeleted".
 */
export interface ProjectDeleted {
id: ProjectId
deleted: true
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "KeyFields".
 */
export interface KeyFields {
id: string
project_id: ProjectId
/**
 * what the key is for; empty for keys made before names
 */
name: string
mode: ("live" | "test")
hint: string
created_at: string
expires_at: (string | null)
revoked_at: (string | null)
/**
 * to within a minute
 */
last_used_at: (string | null)
state: ("active" | "expired" | "revoked")
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "KeyList".
 */
export interface KeyList {
keys: Key[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "KeyCreate".
 */
export interface KeyCreate {
mode: ("live" | "test")
expires_at?: Expiry
/**
 * what the key is for ("billing worker"); kept by a rotation
 */
name?: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "KeyRotate".
 */
export interface KeyRotate {
/**
 * how long the old key keeps working (default 24 h; 0: it stops now)
 */
grace_seconds?: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "KeyRotated".
 */
export interface KeyRotated {
key: KeyCreated
previous: Key
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProviderAccount".
 */
export interface ProviderAccount {
id: string
project_id: ProjectId
slug: string
/**
 * the vendor behind the slug ("Postmark"; `smtp`: "SMTP relay")
 */
vendor: string
/**
 * the operator's name for the account
 */
label: (string | null)
host: (string | null)
port: (number | null)
user: (string | null)
tls: ("starttls" | "implicit" | "none" | null)
endpoint: (string | null)
region: (string | null)
domain?: (string | null)
webhook_public_key?: (string | null)
priority: number
free_quota: (number | null)
/**
 * whether each secret is set (secrets are never shown)
 */
credentials: {
pass: boolean
api_key: boolean
webhook_secret: boolean
}
feedback_path: string
/**
 * the URL to give the provider for its notifications (null: it sends none, or no HTTP listener). Where the provider proves itself by the webhook secret in the URL (provider-a, -e, -f), the secret is in it only in the answer that set it (attach, or an update replacing webhook_secret), and masked (••••••••) everywhere else
 */
feedback_url: (string | null)
created_at: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProviderList".
 */
export interface ProviderList {
providers: ProviderAccount[]
}
/**
 * The account fields each slug takes (* required; the same as `postern provider attach --help`). smtp: host*, port, tls, user, pass; provider-a-api: api_key*, user, region, domain, endpoint, webhook_secret; provider-a-smtp: user, pass, region, domain, host, port, tls, webhook_secret; provider-b-api: api_key*, region, endpoint, webhook_public_key; provider-b-smtp: user, pass, host, port, tls, webhook_public_key; provider-c-api: api_key*, domain*, region, endpoint, webhook_secret; provider-c-smtp: user, pass, domain, region, host, port, tls, webhook_secret; provider-d-api: api_key*, region, endpoint, webhook_secret; provider-d-smtp: user, pass, region, host, port, tls, webhook_secret; provider-e-api: api_key*, endpoint, webhook_secret; provider-e-smtp: user, pass, host, port, tls, webhook_secret; provider-f-api: api_key*, endpoint, webhook_secret; provider-f-smtp: user, pass, host, port, tls, webhook_secret; provider-g-smtp: user, pass, host, port, tls.
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProviderAttach".
 */
export interface ProviderAttach {
slug: ProviderSlug
host?: string
port?: number
user?: string
pass?: string
tls?: ("starttls" | "implicit" | "none")
endpoint?: string
api_key?: string
region?: string
domain?: string
webhook_secret?: string
webhook_public_key?: string
free_quota?: number
priority?: number
/**
 * the operator's name for the account ("transactional, EU")
 */
label?: string
}
/**
 * each field given replaces its value; a secret given replaces the old one and is never shown again (the answer's feedback_url shows a replaced webhook_secret once)
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProviderUpdate".
 */
export interface ProviderUpdate {
priority?: number
free_quota?: (number | null)
label?: (string | null)
user?: string
pass?: string
api_key?: string
webhook_secret?: string
webhook_public_key?: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ProviderDetached".
 */
export interface ProviderDetached {
id: string
detached: true
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ConnectionCheck".
 */
export interface ConnectionCheck {
id: string
slug: string
checkable: boolean
ok: (boolean | null)
/**
 * what was checked: `smtp://host:port (STARTTLS, AUTH)` or `GET <url>`
 */
checked: string
failed_at: ("connect" | "tls" | "auth" | "request" | null)
message: string
duration_ms: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageSummaryFields".
 */
export interface MessageSummaryFields {
id: MessageId
project_id: ProjectId
environment: Environment
sandbox: boolean
source: ("http" | "smtp")
status: MessageStatus
paused: boolean
/**
 * the From address
 */
from: string
to: string[]
subject: string
category: (string | null)
tags: string[]
scheduled_at: (string | null)
created_at: string
/**
 * the From display name, when the message gave one
 */
from_name: (string | null)
/**
 * hand-off attempts made so far
 */
attempts: number
/**
 * when a queued message is next tried (after a failed attempt: on the retry ladder)
 */
next_attempt_at: (string | null)
/**
 * why the last attempt failed
 */
last_error: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessagePage".
 */
export interface MessagePage {
messages: MessageSummary[]
/**
 * pass as `cursor` for the next (older) page; null: no more
 */
next_cursor: (string | null)
/**
 * how many messages match the filter in all (counted up to 10,000)
 */
total: number
/**
 * true: more than `total` match (the count stopped at 10,000)
 */
total_capped: boolean
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "RecipientState".
 */
export interface RecipientState {
email: string
kind: ("to" | "cc" | "bcc")
status: string
reply: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Attachment".
 */
export interface Attachment {
index: number
filename: (string | null)
content_type: string
disposition: ("attachment" | "inline")
content_id: (string | null)
size: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageContent".
 */
export interface MessageContent {
id: MessageId
headers: {
name: string
value: string
}[]
text: (string | null)
/**
 * the message's HTML as stored: show it only in a sandboxed frame
 */
html: (string | null)
text_truncated: boolean
html_truncated: boolean
attachments: Attachment[]
}
/**
 * every field narrows; the same fields as the list's query parameters
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageFilter".
 */
export interface MessageFilter {
project?: ProjectId
environment?: Environment
/**
 * @minItems 1
 */
status?: [MessageStatus, ...(MessageStatus)[]]
from?: string
to?: string
subject?: string
category?: string
tag?: string
created_after?: string
created_before?: string
id?: MessageId
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "BulkResult".
 */
export interface BulkResult {
action: BulkAction
matched: number
changed: number
skipped: number
not_found: number
changed_ids?: MessageId[]
/**
 * present (true) when the request was a dry run: nothing changed
 */
dry_run?: boolean
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ViewerLinkCreate".
 */
export interface ViewerLinkCreate {
/**
 * how long the link works (default viewer.link_expiry_seconds, 7 days; at most viewer.max_link_expiry_seconds)
 */
expires_in_seconds?: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ViewerLink".
 */
export interface ViewerLink {
/**
 * the link's id (`vl.…`), to revoke it
 */
id: string
/**
 * the public viewer page: whoever holds it can read the message until it expires
 */
url: string
expires_at: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "MessageDeleted".
 */
export interface MessageDeleted {
id: MessageId
deleted: true
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Suppression".
 */
export interface Suppression {
email: string
reason: string
created_at: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "SuppressionPage".
 */
export interface SuppressionPage {
suppressions: Suppression[]
next_cursor: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "SuppressionAdd".
 */
export interface SuppressionAdd {
email: Email
reason?: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "SuppressionAdded".
 */
export interface SuppressionAdded {
project_id: ProjectId
email: string
reason: string
created_at: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "SuppressionRemoved".
 */
export interface SuppressionRemoved {
project_id: ProjectId
email: string
removed: true
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "DkimKey".
 */
export interface DkimKey {
id: string
project_id: ProjectId
domain: string
selector: string
algorithm: ("rsa-sha256" | "ed25519-sha256")
/**
 * the TXT record's name
 */
dns_name: string
/**
 * the TXT record's value
 */
dns_value: string
created_at: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "SendingDomainList".
 */
export interface SendingDomainList {
domains: SendingDomain[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "SendingDomain".
 */
export interface SendingDomain {
domain: string
/**
 * the project's active DKIM keys for the domain
 */
dkim_keys: {
id: string
selector: string
}[]
/**
 * the project has sent mail from the domain
 */
sent_from: boolean
}
/**
 * A domain's DNS records, each looked up and judged: what `postern domain check --json` prints and the console's Domains screen shows. Fields are only ever added.
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "DomainCheck".
 */
export interface DomainCheck {
/**
 * lower case, without a final dot
 */
domain: string
checked_at: string
/**
 * the projects whose DKIM keys and provider accounts were considered
 */
projects: string[]
/**
 * ok: every record present, no error; action_needed: a record missing or different, or an error; incomplete: nothing to act on, but some lookups got no answer
 */
status: ("ok" | "action_needed" | "incomplete")
/**
 * DKIM (one per key), SPF (the domain's, and each provider bounce domain's), DMARC, then the providers' own records
 */
records: DomainRecord[]
/**
 * what the providers need that Postern cannot check (records they name per account), and what the check could not consider
 */
notes: {
slug: (string | null)
text: string
}[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "DomainRecord".
 */
export interface DomainRecord {
purpose: ("dkim" | "spf" | "dmarc" | "return_path" | "verification")
type: ("TXT" | "MX" | "CNAME")
/**
 * the record's full name
 */
name: string
/**
 * what to publish at name: for SPF and DMARC the whole record (the one found, with what it lacks added); MX as "PRIORITY HOST"
 */
value: string
/**
 * false: the provider issues the value per account; value shows its form (<…> placeholders) and note says where to find it
 */
value_exact: boolean
/**
 * present: a found value is the one needed; missing: none found; different: found, not the one needed; lookup_failed: DNS gave no answer (nothing is known)
 */
state: ("present" | "missing" | "different" | "lookup_failed")
/**
 * what DNS holds at name of this kind: SPF records, DMARC records (a parent domain's when it applies), the TXT records of a DKIM selector, MX records, the CNAME, or the TXT records that match
 */
found: string[]
/**
 * what the record is for
 */
note: (string | null)
/**
 * SPF: the DNS lookups value costs a receiver, nested includes counted (11: more than the limit of 10); null for other records
 */
dns_lookups: (number | null)
problems: {
severity: ("error" | "warning")
/**
 * spf_multiple_records, spf_too_many_lookups, spf_allows_all, dmarc_multiple_records, dmarc_invalid, dmarc_no_reports, dkim_key_differs, dkim_multiple_records, name_conflict, lookup_failed
 */
code: string
message: string
}[]
required_by: DomainRequiredBy[]
}
/**
 * Who needs a record: a DKIM key, a provider account (its slug), or the domain itself (SPF, DMARC).
 * 
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "DomainRequiredBy".
 */
export interface DomainRequiredBy {
kind: ("dkim_key" | "provider_account" | "domain")
/**
 * the key's or the account's id
 */
id: (string | null)
project_id: (string | null)
slug: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "DkimList".
 */
export interface DkimList {
keys: DkimKey[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "DkimAdd".
 */
export interface DkimAdd {
domain: string
selector: string
algorithm?: ("rsa" | "ed25519")
/**
 * a PEM private key to import; absent: one is generated
 */
private_key?: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "DkimRemoved".
 */
export interface DkimRemoved {
id: string
removed: true
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookFields".
 */
export interface WebhookFields {
id: string
project_id: ProjectId
url: string
events: (MailEventType[] | null)
state: ("enabled" | "disabled")
disabled_at: (string | null)
disabled_reason: (string | null)
failing_since: (string | null)
last_success_at: (string | null)
last_failure_at: (string | null)
previous_secret_expires_at: (string | null)
pending_deliveries: number
failed_deliveries: number
created_at: string
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookList".
 */
export interface WebhookList {
webhooks: Webhook[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookAdd".
 */
export interface WebhookAdd {
url: string
/**
 * @minItems 1
 */
events?: [MailEventType, ...(MailEventType)[]]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookRemoved".
 */
export interface WebhookRemoved {
id: string
removed: true
cancelled_deliveries: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookSecret".
 */
export interface WebhookSecret {
id: string
/**
 * shown only here
 */
secret: string
previous_secret_expires_at: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookTestResult".
 */
export interface WebhookTestResult {
id: string
endpoint_id: string
type: "webhook.test"
delivered: boolean
status_code: (number | null)
error: (string | null)
duration_ms: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookAttempt".
 */
export interface WebhookAttempt {
delivery_id: string
type: string
attempt: number
attempted_at: string
delivered: boolean
status_code: (number | null)
duration_ms: (number | null)
/**
 * why it failed, with the start of the receiver's answer
 */
error: (string | null)
/**
 * the start of the receiver's answer (its body, up to 1 KiB); null when none came
 */
answer: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookAttemptPage".
 */
export interface WebhookAttemptPage {
attempts: WebhookAttempt[]
next_cursor: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Overview".
 */
export interface Overview {
generated_at: string
/**
 * the last 24 hours, oldest first; the current hour last
 * 
 * @minItems 24
 * @maxItems 24
 */
hourly: [{
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, {
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
}, ...({
hour: string
counts: {
accepted: number
sent: number
delivered: number
bounced: number
complained: number
failed: number
suppressed: number
/**
 * hand-offs that failed for now (a temporary refusal, an account refused): the message is tried again
 */
deferred: number
}
})[]]
queue: {
queued: number
scheduled: number
paused: number
captured: number
sending: number
}
oldest_waiting: (null | {
id: MessageId
project_id: ProjectId
created_at: string
age_seconds: number
attempts: number
next_attempt_at: (string | null)
})
/**
 * owners only (null for members)
 */
providers: ({
id: string
project_id: ProjectId
slug: string
handoffs_last_hour: number
failures_last_hour: number
throttled_until: (string | null)
last_error: (string | null)
last_error_at: (string | null)
}[] | null)
/**
 * endpoints failing (every attempt failed since failing_since) or disabled
 */
webhooks: {
id: string
project_id: ProjectId
url: string
state: ("failing" | "disabled")
failing_since: (string | null)
last_failure_at: (string | null)
disabled_at: (string | null)
disabled_reason: (string | null)
}[]
/**
 * owners only
 */
storage: (null | {
spool_bytes: number
spool_counted_at: string
disk_free_bytes: (number | null)
disk_total_bytes: (number | null)
})
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "NodeListener".
 */
export interface NodeListener {
name: string
protocol: ("http" | "smtp" | "console")
host: string
port: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Node".
 */
export interface Node {
/**
 * node.id (default: the host name)
 */
id: string
/**
 * the Postern version it runs
 */
version: string
state: NodeState
pid: number
hostname: string
started_at: string
last_beat_at: string
/**
 * the node's own node.heartbeat_seconds: it is missing after 3 of them without a beat
 */
heartbeat_seconds: number
stopped_at: (string | null)
/**
 * as bound at its start
 */
listeners: NodeListener[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "NodeList".
 */
export interface NodeList {
nodes: Node[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Plan".
 */
export interface Plan {
name: string
/**
 * the plan a project gets when none is named
 */
default: boolean
limits: PlanLimits
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "PlanList".
 */
export interface PlanList {
/**
 * the plans of the configuration (`plans`), by name
 */
plans: Plan[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookDelivery".
 */
export interface WebhookDelivery {
id: string
endpoint_id: string
type: string
status: ("pending" | "delivered" | "failed")
created_at: string
/**
 * the JSON body every attempt sent (the same bytes each time); null when its event is no longer kept
 */
request_body: (string | null)
/**
 * its attempts, in time order
 */
attempts: WebhookAttempt[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "WebhookRedelivery".
 */
export interface WebhookRedelivery {
/**
 * the delivery (the same id: receivers can tell it again)
 */
id: string
endpoint_id: string
type: string
attempt: number
delivered: boolean
status_code: (number | null)
error: (string | null)
answer: (string | null)
duration_ms: number
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ViewerLinkRecord".
 */
export interface ViewerLinkRecord {
id: string
message_id: MessageId
created_at: string
expires_at: string
/**
 * an operator id, or `cli`
 */
created_by: string
created_by_email: (string | null)
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ViewerLinkList".
 */
export interface ViewerLinkList {
/**
 * the message's links that still open it (not expired, not revoked), newest first; the links themselves are never kept
 */
links: ViewerLinkRecord[]
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "ViewerLinkRevoked".
 */
export interface ViewerLinkRevoked {
id: string
revoked: true
}
/**
 * This interface was referenced by `ConsoleApi`'s JSON-Schema
 * via the `definition` "Operations".
 */
export interface Operations {
signIn: {
authenticated: false
params: Record<string, never>
query: Record<string, never>
body: SignIn
}
getSession: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
signOut: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
changePassword: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: PasswordChange
}
listTokens: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
createToken: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: TokenCreate
}
revokeToken: {
authenticated: true
params: {
token_id: string
}
query: Record<string, never>
body: Record<string, never>
}
listNodes: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
getOverview: {
authenticated: true
params: Record<string, never>
query: {
project?: ProjectId
}
body: Record<string, never>
}
listProjects: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
createProject: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: ProjectCreate
}
listPlans: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
getProject: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
deleteProject: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
pauseProject: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
resumeProject: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
changePlan: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: PlanChange
}
changeStrategy: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: StrategyChange
}
listKeys: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
createKey: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: KeyCreate
}
revokeKey: {
authenticated: true
params: {
key_id: string
}
query: Record<string, never>
body: Record<string, never>
}
rotateKey: {
authenticated: true
params: {
key_id: string
}
query: Record<string, never>
body: KeyRotate
}
listProviders: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
attachProvider: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: ProviderAttach
}
updateProvider: {
authenticated: true
params: {
account_id: string
}
query: Record<string, never>
body: ProviderUpdate
}
detachProvider: {
authenticated: true
params: {
account_id: string
}
query: Record<string, never>
body: Record<string, never>
}
checkProvider: {
authenticated: true
params: {
account_id: string
}
query: Record<string, never>
body: Record<string, never>
}
listMessages: {
authenticated: true
params: Record<string, never>
query: {
project?: ProjectId
environment?: Environment
/**
 * repeat for several
 */
status?: MessageStatus[]
/**
 * substring of the sender address (case-insensitive)
 */
from?: string
/**
 * substring of any recipient (To, Cc or Bcc)
 */
to?: string
/**
 * substring (case-insensitive)
 */
subject?: string
category?: string
tag?: string
/**
 * inclusive
 */
created_after?: string
/**
 * exclusive
 */
created_before?: string
id?: MessageId
/**
 * page size (default 50; suppressions 100, up to 1000)
 */
limit?: number
/**
 * the `next_cursor` of the previous page
 */
cursor?: string
}
body: Record<string, never>
}
bulkMessages: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: BulkRequest
}
getMessage: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
deleteMessage: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
getMessageContent: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
getMessageRaw: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
getMessageAttachment: {
authenticated: true
params: {
message_id: MessageId
index: number
}
query: Record<string, never>
body: Record<string, never>
}
getMessageInlinePart: {
authenticated: false
params: {
message_id: MessageId
index: number
}
query: {
/**
 * the signed token the preview document gave
 */
token: string
}
body: Record<string, never>
}
releaseMessage: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
cancelMessage: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
retryMessage: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
getMessagePreview: {
authenticated: true
params: {
message_id: MessageId
}
query: {
/**
 * 1: allow remote images (http and https)
 */
images?: ("0" | "1")
}
body: Record<string, never>
}
createMessageLink: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: ViewerLinkCreate
}
listMessageLinks: {
authenticated: true
params: {
message_id: MessageId
}
query: Record<string, never>
body: Record<string, never>
}
revokeMessageLink: {
authenticated: true
params: {
message_id: MessageId
link_id: string
}
query: Record<string, never>
body: Record<string, never>
}
streamEvents: {
authenticated: true
params: Record<string, never>
query: {
project?: ProjectId
environment?: Environment
}
body: Record<string, never>
}
listSuppressions: {
authenticated: true
params: {
project_id: ProjectId
}
query: {
/**
 * substring of the address
 */
q?: string
limit?: number
/**
 * the `next_cursor` of the previous page
 */
cursor?: string
}
body: Record<string, never>
}
addSuppression: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: SuppressionAdd
}
removeSuppression: {
authenticated: true
params: {
project_id: ProjectId
/**
 * URL-encoded
 */
email: string
}
query: Record<string, never>
body: Record<string, never>
}
exportSuppressions: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
listDkim: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
addDkim: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: DkimAdd
}
removeDkim: {
authenticated: true
params: {
dkim_id: string
}
query: Record<string, never>
body: Record<string, never>
}
listDomains: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
checkDomain: {
authenticated: true
params: {
project_id: ProjectId
/**
 * a host name (example.com)
 */
domain: string
}
query: Record<string, never>
body: Record<string, never>
}
listWebhooks: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: Record<string, never>
}
addWebhook: {
authenticated: true
params: {
project_id: ProjectId
}
query: Record<string, never>
body: WebhookAdd
}
removeWebhook: {
authenticated: true
params: {
webhook_id: string
}
query: Record<string, never>
body: Record<string, never>
}
enableWebhook: {
authenticated: true
params: {
webhook_id: string
}
query: Record<string, never>
body: Record<string, never>
}
rotateWebhookSecret: {
authenticated: true
params: {
webhook_id: string
}
query: Record<string, never>
body: Record<string, never>
}
testWebhook: {
authenticated: true
params: {
webhook_id: string
}
query: Record<string, never>
body: Record<string, never>
}
listWebhookAttempts: {
authenticated: true
params: {
webhook_id: string
}
query: {
/**
 * page size (default 50; suppressions 100, up to 1000)
 */
limit?: number
/**
 * the `next_cursor` of the previous page
 */
cursor?: string
}
body: Record<string, never>
}
getWebhookDelivery: {
authenticated: true
params: {
webhook_id: string
delivery_id: string
}
query: Record<string, never>
body: Record<string, never>
}
redeliverWebhook: {
authenticated: true
params: {
webhook_id: string
delivery_id: string
}
query: Record<string, never>
body: Record<string, never>
}
listOperators: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
createOperator: {
authenticated: true
params: Record<string, never>
query: Record<string, never>
body: OperatorCreate
}
updateOperator: {
authenticated: true
params: {
operator_id: string
}
query: Record<string, never>
body: OperatorUpdate
}
removeOperator: {
authenticated: true
params: {
operator_id: string
}
query: Record<string, never>
body: Record<string, never>
}
resetOperatorPassword: {
authenticated: true
params: {
operator_id: string
}
query: Record<string, never>
body: PasswordResetOptions
}
listAudit: {
authenticated: true
params: Record<string, never>
query: {
/**
 * an operator id, or cli
 */
actor?: string
/**
 * the operator's email (as it was when they acted; any case)
 */
actor_email?: string
action?: string
/**
 * page size (default 50; suppressions 100, up to 1000)
 */
limit?: number
/**
 * the `next_cursor` of the previous page
 */
cursor?: string
}
body: Record<string, never>
}
getOpenApi: {
authenticated: false
params: Record<string, never>
query: Record<string, never>
body: Record<string, never>
}
}
