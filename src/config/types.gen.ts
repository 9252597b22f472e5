/* Generated from src/config/schema.json by scripts/generate-types.mjs. Do not edit. */

/**
 * The Postern config file. Every key has a default; a file need only name what it changes.
 */
export interface PosternConfig {
/**
 * Index, spool and certificates. Relative paths resolve against the working directory. Env: POSTERN_STATE_DIR.
 */
state_dir: string
node: {
/**
 * This process's name among the nodes that serve this state (postern node list, the console's Nodes panel). null: the machine host name. Env: POSTERN_NODE_ID.
 */
id: (string | null)
/**
 * How often the node writes its heartbeat row. A node whose last beat is older than 3 × this is shown missing.
 */
heartbeat_seconds: number
}
store: {
/**
 * Where the index and the message bodies live. sqlite: an embedded index and the spool under state_dir (one node; the default and the fastest). postgres: a shared PostgreSQL database holding the index and the bodies, so several identical nodes serve the same mail (docs/scaling.md). Env: POSTERN_STORE_BACKEND.
 */
backend: ("sqlite" | "postgres")
postgres: {
/**
 * The database's connection URL (postgres://user:password@host:port/database?sslmode=…), required with backend postgres. Env: POSTERN_DATABASE_URL (keeps the password out of the config file).
 */
url: (string | null)
/**
 * Connections this node's event loop opens, all of them at start and kept open while idle (its share of the server's max_connections: docs/scaling.md budgets them); the webhook dispatcher thread opens up to 4 more of its own.
 */
pool_size: number
}
}
/**
 * Each listener serves one environment. Env POSTERN_LISTEN_<NAME> (name upper-cased, non-alphanumerics as _) = host:port overrides its address.
 * 
 * @minItems 1
 */
listeners: [{
name: string
/**
 * http: the send API of one environment; smtp: SMTP submission of one environment; console: the console API (/console/api/v1/…), for operators, on an interface of its own.
 */
protocol: ("http" | "smtp" | "console")
environment?: ("production" | "sandbox")
host: string
port: number
/**
 * SMTP listeners only: STARTTLS on a plain connection, or TLS from the first byte (465-style).
 */
tls: ("starttls" | "implicit")
/**
 * HTTP and console listeners (an SMTP listener's pair is smtp.tls): a PEM certificate chain; with `key`, the listener serves HTTPS only (HTTP/1.1 over TLS 1.2 or later; the console's session cookie is then Secure), and SIGHUP reads the pair again. null, and acme false: plain HTTP (keep the listener on a private interface, or behind a proxy that terminates TLS).
 */
cert: (string | null)
/**
 * HTTP and console listeners: the PEM private key of `cert`.
 */
key: (string | null)
/**
 * Serve the certificate tls.acme obtains and renews, instead of `cert`/`key` (or smtp.tls on an SMTP listener): an HTTP or console listener then serves HTTPS, an SMTP listener uses it for STARTTLS or implicit TLS. Until the first certificate arrives the listener serves a self-signed placeholder and GET /readyz fails its certificates check.
 */
acme: boolean
/**
 * SMTP listeners only: the listener sits behind a load balancer that sends the PROXY protocol (v1, the text header: HAProxy `send-proxy`). Every connection must come from an address in trusted_proxies and start with the header, whose client address is the session's (per-IP limits, logs); any other connection is refused (421 at once from another address; from a listed one without a valid header, `* BAD Invalid PROXY header` and closed).
 */
proxy_protocol: boolean
/**
 * SMTP listeners with proxy_protocol only (and required there): the load balancer's addresses, as IP addresses, CIDRs (10.0.0.0/24, 2001:db8::/64) or loopback, linklocal, uniquelocal.
 */
trusted_proxies: string[]
}, ...({
name: string
/**
 * http: the send API of one environment; smtp: SMTP submission of one environment; console: the console API (/console/api/v1/…), for operators, on an interface of its own.
 */
protocol: ("http" | "smtp" | "console")
environment?: ("production" | "sandbox")
host: string
port: number
/**
 * SMTP listeners only: STARTTLS on a plain connection, or TLS from the first byte (465-style).
 */
tls: ("starttls" | "implicit")
/**
 * HTTP and console listeners (an SMTP listener's pair is smtp.tls): a PEM certificate chain; with `key`, the listener serves HTTPS only (HTTP/1.1 over TLS 1.2 or later; the console's session cookie is then Secure), and SIGHUP reads the pair again. null, and acme false: plain HTTP (keep the listener on a private interface, or behind a proxy that terminates TLS).
 */
cert: (string | null)
/**
 * HTTP and console listeners: the PEM private key of `cert`.
 */
key: (string | null)
/**
 * Serve the certificate tls.acme obtains and renews, instead of `cert`/`key` (or smtp.tls on an SMTP listener): an HTTP or console listener then serves HTTPS, an SMTP listener uses it for STARTTLS or implicit TLS. Until the first certificate arrives the listener serves a self-signed placeholder and GET /readyz fails its certificates check.
 */
acme: boolean
/**
 * SMTP listeners only: the listener sits behind a load balancer that sends the PROXY protocol (v1, the text header: HAProxy `send-proxy`). Every connection must come from an address in trusted_proxies and start with the header, whose client address is the session's (per-IP limits, logs); any other connection is refused (421 at once from another address; from a listed one without a valid header, `* BAD Invalid PROXY header` and closed).
 */
proxy_protocol: boolean
/**
 * SMTP listeners with proxy_protocol only (and required there): the load balancer's addresses, as IP addresses, CIDRs (10.0.0.0/24, 2001:db8::/64) or loopback, linklocal, uniquelocal.
 */
trusted_proxies: string[]
})[]]
/**
 * Certificates Postern obtains itself (docs/tls.md).
 */
tls: {
/**
 * Automatic certificates (ACME, RFC 8555): one certificate naming every domain, served by the listeners with `acme: true`; obtained at start when there is none, renewed at two thirds of its life and swapped in without a restart (sessions in progress keep theirs). Kept in <state_dir>/certs (0600) on SQLite; in the database on PostgreSQL, where one node orders at a time and the others take the stored one. Setting this accepts the CA's terms of service. null: no ACME.
 */
acme: ({
/**
 * The CA's ACME directory: https://acme-v02.api.letsencrypt.org/directory for Let's Encrypt (https://acme-staging-v02.api.letsencrypt.org/directory while trying things out).
 */
directory_url: string
/**
 * The ACME account's contact address: the CA writes there about expiring certificates and policy changes.
 */
email: string
/**
 * The names the certificate covers, in lower case (no wildcards: http-01 and tls-alpn-01 cannot prove them; no IP addresses); the first names it (postern_certificate_expiry_seconds{name}). Each must resolve to this host, or to its load balancer.
 * 
 * @minItems 1
 * @maxItems 100
 */
domains: [string, ...(string)[]]
/**
 * http-01: the CA fetches http://<domain>/.well-known/acme-challenge/<token> on port 80, answered by http.redirect_plain (required). tls-alpn-01: the CA opens TLS to <domain> on port 443 with ALPN acme-tls/1, answered by the HTTP and console listeners with acme: true.
 */
challenge: ("http-01" | "tls-alpn-01")
/**
 * A PEM file of CA certificates trusted for the directory's HTTPS besides the system's (a private ACME CA; Pebble in tests). null: the system's only.
 */
directory_ca: (string | null)
} | null)
}
http: {
/**
 * POST /v1/send; 48 MiB fits the contract's largest message (25 MB of attachments as base64 plus 2 MB html and text).
 */
max_body_bytes: number
/**
 * POST /v1/send/batch (64 MiB).
 */
max_batch_body_bytes: number
/**
 * A client must finish sending a request's headers within this time, counted from the connection's start (or the end of its previous request): an idle or slow connection is answered 408 and closed.
 */
headers_timeout_ms: number
/**
 * A client must finish sending the whole request within this time.
 */
request_timeout_ms: number
keep_alive_timeout_ms: number
/**
 * Open HTTP connections across the send API's HTTP listeners (the console's count in console.max_connections). A connection beyond it (or beyond max_connections_per_ip) gets 503 server_busy with Retry-After and is closed; while 64 such refusals are pending, further ones are closed at once. Keep max_connections + console.max_connections + smtp.max_clients + about 230 below the process's open-file limit (ulimit -n).
 */
max_connections: number
/**
 * Open HTTP connections from one TCP peer: by default half of max_connections, so one address cannot take them all. Counted when a connection opens, before any header, so by the TCP peer, never by X-Forwarded-For; a peer in trusted_proxies is not held to it (only to max_connections). A reverse proxy in front of Postern that is not listed there is one address: raise this to its connection pool size.
 */
max_connections_per_ip: number
/**
 * Reverse proxies and load balancers in front of the HTTP and console listeners: IP addresses, CIDRs (10.0.0.0/24, 2001:db8::/64) or loopback, linklocal, uniquelocal. From such a TCP peer the client address is taken from X-Forwarded-For (the right-most address in it that is not itself a trusted proxy); from any other peer the header is ignored. Empty (the default): the header is always ignored.
 */
trusted_proxies: string[]
/**
 * Memory budget of request bodies in flight (48 MiB: one body of the largest send at a time, small ones beside it): a request holds its body's bytes (Content-Length, or as received) from before it is read until it is answered; one that does not fit waits up to body_wait_ms, first come first served, then gets 503 server_busy with Retry-After. A body larger than the budget runs when nothing else holds any. While processed, a body costs about 3.5 times its size in memory.
 */
max_inflight_body_bytes: number
/**
 * How long a request waits for room in max_inflight_body_bytes before 503 server_busy (a waiting request holds no body memory: its client is held back by TCP).
 */
body_wait_ms: number
/**
 * A request refused before its body was read whole (a bad key, a body over its limit, a shape refused mid-body, an unknown path) is answered with Connection: close, and up to this many more bytes of its body are read and discarded before the connection is closed, so that a client still sending (Python's http.client, Node's fetch) reads the answer instead of a reset connection, as nginx's lingering close does. 64 MiB: any body the send API takes. A body whose Content-Length is larger is not drained; 0 drains nothing.
 */
refused_body_drain_bytes: number
/**
 * The longest a refused request's body is drained (refused_body_drain_bytes): a slower body is cut off then (nginx's lingering_time). 0: the connection is closed as soon as the answer is out.
 */
refused_body_drain_ms: number
/**
 * A plain-HTTP listener (port 80) beside the HTTPS ones. GET and HEAD are answered 308 with the same path on the HTTPS listener `to` (under the host name the client asked for); any other method gets 403 https_required and nothing of it is read or processed: a request that carried an API key sent it in clear, so treat that key as exposed and rotate it. With tls.acme's http-01 challenge it also answers /.well-known/acme-challenge/. null: no plain listener.
 */
redirect_plain: ({
host: string
/**
 * 80 on the internet (where ACME's http-01 validates); another port only behind a proxy, or in tests.
 */
port: number
/**
 * The name of the HTTPS listener redirects point to; null: the first production HTTP listener serving TLS, else the first HTTP or console listener that does.
 */
to: (string | null)
} | null)
}
spool: {
/**
 * Worker threads that compose MIME (HTTP), rewrite and parse messages held whole (SMTP) and write spool temp files (CPU work kept off the event loop). The second gets work only while the first has 4 tasks waiting.
 */
writer_threads: number
/**
 * How each commit group's spool files are flushed before their index rows commit: auto = renamed into place, then one syncfs(2) for the group where the native addon is built (Linux), else fsync per file before its rename; fsync = always one fsync per file (for filesystems where a whole-filesystem flush is costly, e.g. shared with other busy writers).
 */
sync: ("auto" | "fsync")
/**
 * A message's MIME up to this size is stored in the index itself (SQLite), in the same transaction as its row: its commit group is then made durable by the one flush of the index's write-ahead log, with no spool file created, renamed or flushed. A larger message is a spool file. 0: every message is a spool file.
 */
index_body_max_bytes: number
/**
 * The disk guard: while the state directory's filesystem has less free space than this, new mail is refused before the disk is actually full (HTTP 503 storage_low with Retry-After, SMTP 452 4.3.1); delivery, webhooks and the console keep working, and acceptance resumes by itself within a second of space returning. null (the default): 5 % of the filesystem, at most 1 GiB. 0 turns the guard off.
 */
min_free_bytes: (number | null)
}
/**
 * How the JavaScript heap (V8) of the server process and its threads grows. Applied at start, to the whole process.
 */
memory: {
/**
 * After each full garbage collection the heap may grow by this share of what survived it before the next full collection. 0 = V8's own rule, which lets it grow up to 4 times under allocation-heavy load (relaying thousands of messages a second, that held about 90 MiB of garbage resident). 20 keeps a server working through a 100,000-message queue under 256 MiB, for a little more collection work.
 */
heap_growth_percent: number
}
smtp: {
/**
 * Name in the greeting and EHLO reply; null: the machine host name.
 */
hostname: (string | null)
/**
 * SIZE advertised and enforced (40 MiB: the contract's 25 MB of attachments as base64 plus 2 MB html and text).
 */
max_message_bytes: number
/**
 * A message up to this size is held in memory and rewritten, written and parsed in one step on a spool writer thread; a larger one streams to disk as it arrives. Worst-case memory: max_clients × this per listener.
 */
in_memory_message_bytes: number
/**
 * Messages over in_memory_message_bytes streamed (rewritten, written and parsed) at once, over all SMTP listeners of the process: each costs about 1 MiB of stream buffers while it is parsed. A further one is not read past its first in_memory_message_bytes (its client is held back by TCP; its idle timeout does not run) until one finishes; after stream_wait_ms it is read to its end without being stored and answered 451 4.3.0 server_busy.
 */
max_streamed_messages: number
/**
 * How long a big message waits for room in max_streamed_messages before it is drained unstored and answered 451 4.3.0 server_busy (retry). Under the 3 minutes RFC 5321 has a client wait for each block of DATA to be taken.
 */
stream_wait_ms: number
/**
 * RCPT TO per message (452 4.5.3 beyond).
 */
max_recipients: number
/**
 * Concurrent connections over all SMTP listeners of the process, per listener.
 */
max_clients: number
max_clients_per_ip: number
/**
 * A session silent this long is closed.
 */
idle_timeout_ms: number
/**
 * A session that has not authenticated this long after it connected is closed with 421: one without a key cannot hold a listener slot for the idle timeout.
 */
unauthenticated_timeout_ms: number
/**
 * Pause before the 220 greeting; a client that talks during it is refused (early-talker detection, an MX defence against spambots). Every listener requires AUTH, so by default there is none: it would cost each connection this long (smtp-server's own is a fixed 100 ms).
 */
greeting_delay_ms: number
/**
 * No session lasts longer than this.
 */
session_timeout_ms: number
max_messages_per_session: number
/**
 * Commands a connection may send before it authenticates, before and after STARTTLS alike (AUTH itself not counted); the one that reaches this is answered 421 and the connection closed.
 */
max_unauthenticated_commands: number
/**
 * Longest command line, CRLF excluded (RFC 5321 requires servers to take 512 octets; 2048, as Postfix, leaves room for long AUTH and MAIL lines). A longer one is answered 500 5.5.2 Line too long and the connection closed.
 */
max_command_line_bytes: number
/**
 * Failed AUTH attempts in a session answered at once; later ones wait auth_failure_delay_ms more each.
 */
auth_failures_before_delay: number
/**
 * How much longer each failed AUTH attempt past auth_failures_before_delay waits for its answer than the one before.
 */
auth_failure_delay_ms: number
auth_failures_before_disconnect: number
/**
 * On SIGTERM, in-flight DATA may finish for this long; new sessions get 421.
 */
shutdown_grace_ms: number
tls: {
/**
 * PEM certificate chain; null: <state_dir>/certs/postern.crt, self-signed on first start.
 */
cert: (string | null)
/**
 * PEM private key; null: <state_dir>/certs/postern.key.
 */
key: (string | null)
}
}
/**
 * The scheduler that relays spooled messages through the project's provider accounts.
 */
delivery: {
/**
 * false: accept and store only (nothing is relayed).
 */
enabled: boolean
/**
 * How often the scheduler looks for due messages when idle.
 */
poll_interval_ms: number
/**
 * Messages leased per look.
 */
batch_size: number
/**
 * A leased message not finished by then (a crash) is due again: delivery is at-least-once.
 */
lease_ms: number
/**
 * Messages in hand-off at once, overall.
 */
concurrency: number
/**
 * Messages in hand-off at once per provider account (20, as Postfix relays to one destination over 20 connections by default).
 */
per_account_concurrency: number
/**
 * Waits after the 1st, 2nd, … all-candidates-failed attempt; the last repeats until max_age.
 * 
 * @minItems 1
 */
retry_ladder_seconds: [number, ...(number)[]]
/**
 * A message older than this (72 h) ends failed, in every state.
 */
max_age_seconds: number
/**
 * Connection, greeting and socket timeout towards SMTP relays.
 */
smtp_timeout_ms: number
/**
 * Pooled connections per SMTP relay account (as many as the account's hand-offs at once, so none waits for a connection).
 */
smtp_pool_size: number
/**
 * Whole-request timeout towards provider HTTP APIs; a timeout is a temporary failure.
 */
api_timeout_ms: number
}
/**
 * Provider feedback endpoints (POST /v1/feedback/<account id>): delivery, bounce and complaint notifications from provider accounts.
 */
feedback: {
/**
 * Largest notification body accepted (413 beyond).
 */
max_body_bytes: number
/**
 * Signed notifications older (or newer) than this are refused as stale.
 */
tolerance_seconds: number
/**
 * Directory of SNS signing certificates (PEM, named by the last path segment of SigningCertURL) used instead of fetching them; for hosts without outbound HTTPS, and tests.
 */
sns_certificate_dir: (string | null)
}
/**
 * Default message and Idempotency-Key retention for projects that set none.
 */
retention_days: number
/**
 * Plans by name. A project names its plan; `postern project plan` changes it and the new limits apply to the next request.
 */
plans: {
[k: string]: {
/**
 * Messages per calendar month (UTC). Refused with 402 monthly_quota_exceeded when reached, unless overage is true.
 */
monthly_messages: number
/**
 * Paid plans: accept past monthly_messages and record the overage instead of refusing.
 */
overage: boolean
/**
 * Daily send ceiling (UTC day); 429 daily_send_cap_exceeded when reached. null: none.
 */
daily_messages: (number | null)
/**
 * Bytes of accepted MIME per calendar month; 402 throughput_quota_exceeded beyond it (plus the grace margin).
 */
monthly_bytes: number
/**
 * Extra data volume allowed past monthly_bytes before refusing.
 */
bytes_grace_percent: number
/**
 * Distinct sender domains a project may use (subdomains count separately); null: no cap.
 */
sender_domains: (number | null)
} | undefined
}
/**
 * The plan of a project created without --plan.
 */
default_plan: string
limits: {
/**
 * Distinct categories per project (the contract says 100).
 */
categories_per_project: number
}
/**
 * Sliding-window request limits; 429 rate_limited with a truthful Retry-After.
 */
rate_limits: {
window_seconds: number
/**
 * POST /v1/send per key per window.
 */
send_per_key: number
/**
 * POST /v1/send/batch per key per window.
 */
batch_per_key: number
/**
 * Requests without a valid key, per client IP per window; once spent, that IP is refused before any key lookup.
 */
unauthenticated_per_ip: number
/**
 * Public viewer requests (GET /view/...: the page and its message body) per client IP per window; then 429 with Retry-After.
 */
viewer_per_ip: number
}
policy: {
/**
 * false turns off rate limits, plans, quotas and project policy. For benchmarks only.
 */
enabled: boolean
}
metrics: {
/**
 * Serve Prometheus metrics at GET /metrics on the console listeners, and record them (docs/operations.md, "Metrics"). false: nothing is recorded and /metrics answers 404.
 */
enabled: boolean
/**
 * When set, GET /metrics needs "Authorization: Bearer <token>" (401 otherwise). null: no token (the console listener listens on 127.0.0.1 by default).
 */
token: (string | null)
}
log: {
level: ("fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent")
}
/**
 * The console API (listeners with protocol console): sessions, sign-in throttling, live updates.
 */
console: {
/**
 * A console session unused this long (12 h) ends; the next request answers 401 session_expired.
 */
session_idle_seconds: number
/**
 * The sliding window of the failed sign-in limits.
 */
sign_in_window_seconds: number
/**
 * Failed sign-ins per client IP per window; then 429 with Retry-After.
 */
sign_in_failures_per_ip: number
/**
 * Failed sign-ins per email (whether or not an operator has it) per window; then 429 with Retry-After.
 */
sign_in_failures_per_account: number
/**
 * While a live-updates stream is open, how often the events outbox is read for new and changed messages.
 */
events_poll_ms: number
/**
 * How often every open live-updates stream's session or token, operator and project access are read again: a stream whose authority has ended (signed out, revoked, expired, removed, including on another node of a shared PostgreSQL) is closed, and one whose operator lost a project stops carrying it (or ends, if it follows that project). Sign-out, revocation and operator changes made through this node's console close its streams at once.
 */
stream_check_ms: number
/**
 * Bytes a live-updates stream may have waiting for its client. A stream that would go past it gets one event: refresh {"reason":"overflow"} (reload), and nothing more until its client has taken everything; one still behind at the next stream_check_ms is closed.
 */
stream_max_queued_bytes: number
/**
 * Live-updates streams open at once on this node (all console listeners); one more is answered 503 server_busy. Keep it below max_connections: other console requests need connections too.
 */
max_streams: number
/**
 * Live-updates streams one operator may hold open on this node (sessions and tokens together); one more is answered 429 rate_limited.
 */
max_streams_per_operator: number
/**
 * Open connections across the console listeners, counted apart from http.max_connections (the send API's), so neither door can take the other's. A connection beyond it (or beyond max_connections_per_ip) gets 503 server_busy with Retry-After and is closed.
 */
max_connections: number
/**
 * Open console connections from one TCP peer (half of max_connections by default). Counted by the TCP peer, never by X-Forwarded-For; a peer in http.trusted_proxies is held to max_connections only.
 */
max_connections_per_ip: number
}
/**
 * The public viewer (GET /view/{id}/{token} on the HTTP listeners) and its signed, expiring links.
 */
viewer: {
/**
 * Where people open viewer links (scheme, host, port, optional path prefix behind a proxy). null: the first production HTTP listener's own address.
 */
base_url: (string | null)
/**
 * How long a link lives when its maker names no expiry (7 days).
 */
link_expiry_seconds: number
/**
 * The longest expiry a link may be given (90 days).
 */
max_link_expiry_seconds: number
}
/**
 * The DNS lookups of `postern domain check` and the console's Domains screen (node's resolver, c-ares).
 */
dns: {
/**
 * The resolvers asked, in order: an IPv4 address, an IPv6 address, or either with a port (`192.0.2.53:53`, `[2001:db8::53]:53`). Empty: the system's (/etc/resolv.conf).
 * 
 * @maxItems 8
 */
servers: string[]
/**
 * How long one query waits for an answer before it is sent again.
 */
timeout_ms: number
/**
 * How many times a query is sent to each resolver before the lookup counts as failed (`lookup_failed`).
 */
tries: number
}
/**
 * Outbound lifecycle webhooks: the dispatcher that fans events out to the registered endpoints and delivers them, signed, at least once.
 */
webhooks: {
/**
 * false: events are still recorded (and delivered once this is true again), nothing is sent.
 */
enabled: boolean
/**
 * true allows endpoints on loopback, private, link-local, CGNAT and ULA addresses, and plain http:// towards those (never towards public addresses). Checked at `webhook add` and on every resolved address before every delivery.
 */
allow_private_targets: boolean
/**
 * A delivery counts only if a 2xx status arrives within this time (connect and TLS included).
 */
timeout_ms: number
/**
 * Waits after the 1st, 2nd, … failed attempt; attempts = length + 1 (default: 6 attempts over about 9 h 11 min). After the last one the delivery is failed.
 * 
 * @minItems 0
 * @maxItems 50
 */
retry_ladder_seconds: number[]
/**
 * Each wait is multiplied by a random factor in [1 - jitter, 1 + jitter].
 */
retry_jitter: number
/**
 * An endpoint whose every attempt has failed for this long (no success in between) is disabled; `postern webhook enable` resumes it.
 */
disable_after_seconds: number
/**
 * After `webhook rotate-secret` the previous secret keeps signing (a second v1 entry) for this long.
 */
secret_rotation_grace_seconds: number
/**
 * Deliveries in flight at once, overall.
 */
concurrency: number
/**
 * Deliveries in flight at once per endpoint: a slow endpoint holds at most this many slots.
 */
per_endpoint_concurrency: number
/**
 * How often the dispatcher looks for new events and due retries when idle.
 */
poll_interval_ms: number
/**
 * Events fanned out per transaction.
 */
batch_size: number
/**
 * A claimed delivery whose outcome is not recorded by then (a crash) is due again; raised to timeout_ms + 2 s when lower.
 */
lease_ms: number
/**
 * Delivered and failed deliveries are deleted this long after they finished.
 */
retention_days: number
/**
 * While the machine's CPUs are saturated (the dispatcher's thread keeps waiting for one), the dispatcher uses at most this share of one core; webhooks then lag and catch up once CPU is free again. Unthrottled on a machine with CPU to spare. Set it to the number of cores to turn the limit off.
 */
saturated_cpu_share: number
/**
 * The dispatcher's thread priority (Linux): "idle" (SCHED_IDLE: it runs only on CPU time nothing else wants, and a waking thread of the doors preempts it at once; nice 19 where the native addon is not built), or a nice value 0-19 (0: the process priority). On a saturated machine acceptance gets the CPU first and webhooks catch up afterwards.
 */
nice: ("idle" | number)
}
}
