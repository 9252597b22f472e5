/* Generated from src/config/schema.json by scripts/generate-types.mjs. Do not edit. */

/**
 * The Postern config file. Every key has a default; a file need only name what it changes.
 */
export interface PosternConfig {
/**
 * Index, spool and certificates. Relative paths resolve against the working directory. Env: POSTERN_STATE_DIR.
 */
state_dir: string
/**
 * Each listener serves one environment. Env POSTERN_LISTEN_<NAME> (name upper-cased, non-alphanumerics as _) = host:port overrides its address.
 * 
 * @minItems 1
 */
listeners: [{
name: string
protocol: "http"
environment: ("production" | "sandbox")
host: string
port: number
}, ...({
name: string
protocol: "http"
environment: ("production" | "sandbox")
host: string
port: number
})[]]
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
 * A client must finish sending headers within this time.
 */
headers_timeout_ms: number
/**
 * A client must finish sending the whole request within this time.
 */
request_timeout_ms: number
keep_alive_timeout_ms: number
}
spool: {
/**
 * Worker threads that compose MIME and write spool files (CPU work and fsync waits kept off the event loop).
 */
writer_threads: number
}
/**
 * Default message and Idempotency-Key retention for projects that set none.
 */
retention_days: number
log: {
level: ("fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent")
}
}
