/** Numbered, append-only schema migrations, run in order at start. Never edit a released one. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const migrations: Migration[] = [
  {
    version: 1,
    name: 'projects, keys, providers, suppressions, messages, idempotency, events',
    sql: `
      CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        plan TEXT NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        strategy TEXT NOT NULL DEFAULT 'fallback',
        retention_days INTEGER,
        created_at INTEGER NOT NULL,
        deleted_at INTEGER
      );
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
        key_hash BLOB NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER
      );
      CREATE INDEX api_keys_project ON api_keys(project_id);
      CREATE TABLE provider_accounts (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        slug TEXT NOT NULL,
        settings TEXT NOT NULL,
        secrets TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 100,
        free_quota INTEGER,
        created_at INTEGER NOT NULL,
        detached_at INTEGER
      );
      CREATE INDEX provider_accounts_project ON provider_accounts(project_id, detached_at);
      CREATE TABLE suppressions (
        project_id TEXT NOT NULL REFERENCES projects(id),
        email TEXT NOT NULL COLLATE NOCASE,
        reason TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, email)
      );
      CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        environment TEXT NOT NULL CHECK (environment IN ('production', 'sandbox')),
        source TEXT NOT NULL CHECK (source IN ('http', 'smtp')),
        status TEXT NOT NULL,
        hold_reason TEXT,
        from_email TEXT NOT NULL,
        recipients TEXT NOT NULL,
        subject TEXT NOT NULL,
        tags TEXT NOT NULL,
        metadata TEXT NOT NULL,
        category TEXT,
        routing TEXT NOT NULL,
        provider_options TEXT,
        scheduled_at INTEGER,
        spool_path TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        idempotency_key TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER,
        lease_until INTEGER,
        provider_slug TEXT,
        provider_message_id TEXT,
        last_error TEXT
      );
      CREATE INDEX messages_project_created ON messages(project_id, created_at);
      CREATE INDEX messages_status_due ON messages(status, next_attempt_at);
      CREATE TABLE idempotency_keys (
        project_id TEXT NOT NULL,
        environment TEXT NOT NULL,
        key TEXT NOT NULL,
        message_id TEXT NOT NULL,
        response TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, environment, key)
      ) WITHOUT ROWID;
      CREATE INDEX idempotency_created ON idempotency_keys(created_at);
      CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        message_id TEXT,
        type TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        data TEXT NOT NULL
      );
      CREATE INDEX events_message ON events(message_id);
    `,
  },
  {
    version: 2,
    name: 'usage counters, sender domains, categories',
    sql: `
      CREATE TABLE usage_counters (
        project_id TEXT NOT NULL,
        period TEXT NOT NULL,
        messages INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (project_id, period)
      ) WITHOUT ROWID;
      CREATE TABLE sender_domains (
        project_id TEXT NOT NULL,
        domain TEXT NOT NULL,
        first_used_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, domain)
      ) WITHOUT ROWID;
      CREATE TABLE categories (
        project_id TEXT NOT NULL,
        name TEXT NOT NULL,
        first_used_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, name)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 3,
    name: 'delivery attempts, recipient outcomes, provider usage, DKIM keys',
    sql: `
      CREATE TABLE attempts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL,
        provider_account_id TEXT,
        provider_slug TEXT,
        started_at INTEGER NOT NULL,
        finished_at INTEGER NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('sent', 'temporary', 'account', 'permanent')),
        reply TEXT
      );
      CREATE INDEX attempts_message ON attempts(message_id);
      CREATE TABLE recipient_outcomes (
        message_id TEXT NOT NULL,
        email TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('bounced', 'suppressed')),
        reply TEXT,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (message_id, email)
      ) WITHOUT ROWID;
      CREATE TABLE provider_usage (
        provider_account_id TEXT NOT NULL,
        period TEXT NOT NULL,
        messages INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (provider_account_id, period)
      ) WITHOUT ROWID;
      CREATE TABLE dkim_keys (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        domain TEXT NOT NULL,
        selector TEXT NOT NULL,
        algorithm TEXT NOT NULL CHECK (algorithm IN ('rsa-sha256', 'ed25519-sha256')),
        private_key TEXT NOT NULL,
        public_key TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        removed_at INTEGER
      );
      CREATE UNIQUE INDEX dkim_keys_active ON dkim_keys(project_id, domain) WHERE removed_at IS NULL;
      CREATE INDEX messages_status_lease ON messages(status, lease_until);
      -- Recipients still owed a hand-off after a partial one (a 4xx at RCPT); NULL: all of them.
      ALTER TABLE messages ADD COLUMN pending_recipients TEXT;
    `,
  },
  {
    version: 4,
    name: 'provider feedback: receipts, per-attempt provider ids, recipient delivery outcomes',
    sql: `
      -- Feedback is matched to the attempt that produced the provider's message id.
      ALTER TABLE attempts ADD COLUMN provider_message_id TEXT;
      CREATE INDEX attempts_provider_message ON attempts(provider_message_id) WHERE provider_message_id IS NOT NULL;
      -- One row per feedback item already applied: the same notification twice changes nothing.
      CREATE TABLE feedback_receipts (
        provider_account_id TEXT NOT NULL,
        receipt_key TEXT NOT NULL,
        received_at INTEGER NOT NULL,
        PRIMARY KEY (provider_account_id, receipt_key)
      ) WITHOUT ROWID;
      CREATE INDEX feedback_receipts_received ON feedback_receipts(received_at);
      -- Recipient outcomes now also come from provider feedback.
      CREATE TABLE recipient_outcomes_v4 (
        message_id TEXT NOT NULL,
        email TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('bounced', 'suppressed', 'delivered', 'soft_bounced', 'complained', 'failed')),
        reply TEXT,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (message_id, email)
      ) WITHOUT ROWID;
      INSERT INTO recipient_outcomes_v4 SELECT message_id, email, status, reply, created_at FROM recipient_outcomes;
      DROP TABLE recipient_outcomes;
      ALTER TABLE recipient_outcomes_v4 RENAME TO recipient_outcomes;
    `,
  },
  {
    version: 5,
    name: 'webhook endpoints, webhook deliveries, the dispatcher cursor over events',
    sql: `
      CREATE TABLE webhook_endpoints (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        url TEXT NOT NULL,
        event_types TEXT,
        secret TEXT NOT NULL,
        previous_secret TEXT,
        previous_secret_expires_at INTEGER,
        -- Only events after this seq (the newest when the endpoint was added) are delivered.
        from_seq INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        disabled_at INTEGER,
        disabled_reason TEXT,
        failing_since INTEGER,
        last_success_at INTEGER,
        last_failure_at INTEGER,
        removed_at INTEGER
      );
      CREATE INDEX webhook_endpoints_project ON webhook_endpoints(project_id);
      -- One row per (endpoint, event): the durable outbox of outgoing webhooks.
      CREATE TABLE webhook_deliveries (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
        event_seq INTEGER,
        type TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER,
        created_at INTEGER NOT NULL,
        last_attempt_at INTEGER,
        last_status INTEGER,
        last_error TEXT,
        completed_at INTEGER
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries(endpoint_id, next_attempt_at) WHERE status = 'pending';
      CREATE INDEX webhook_deliveries_completed ON webhook_deliveries(completed_at) WHERE status <> 'pending';
      -- The newest event already fanned out (written with the fan-out; past events no endpoint wants, every few seconds).
      CREATE TABLE webhook_cursor (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        event_seq INTEGER NOT NULL
      );
      INSERT INTO webhook_cursor (id, event_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM events;
    `,
  },
  {
    version: 6,
    name: 'policy generation: a counter every change to keys, projects, provider accounts and DKIM keys moves',
    sql: `
      -- Read before serving any of those rows from memory (store/policyCache.ts): whichever
      -- process changed them (the server, the CLI), the counter moved and the cache is dropped.
      CREATE TABLE policy_generation (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        n INTEGER NOT NULL
      );
      INSERT INTO policy_generation (id, n) VALUES (1, 0);
    ${policyGenerationTriggers()}`,
  },
  {
    version: 7,
    name: 'console: operators, their projects, sessions and tokens, the audit log, key use, webhook attempts',
    sql: `
      CREATE TABLE operators (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL COLLATE NOCASE UNIQUE,
        role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
        -- scrypt$<N>$<r>$<p>$<salt b64>$<hash b64> (operator/passwords.ts)
        password_hash TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        password_changed_at INTEGER NOT NULL
      );
      -- A member sees only these projects; an owner sees every project.
      CREATE TABLE operator_projects (
        operator_id TEXT NOT NULL REFERENCES operators(id) ON DELETE CASCADE,
        project_id TEXT NOT NULL REFERENCES projects(id),
        PRIMARY KEY (operator_id, project_id)
      ) WITHOUT ROWID;
      -- Console sessions, by the SHA-256 of the cookie value (the value itself is never stored).
      CREATE TABLE operator_sessions (
        id_hash BLOB PRIMARY KEY,
        operator_id TEXT NOT NULL REFERENCES operators(id) ON DELETE CASCADE,
        created_at INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL,
        client_ip TEXT
      );
      CREATE INDEX operator_sessions_operator ON operator_sessions(operator_id);
      CREATE INDEX operator_sessions_seen ON operator_sessions(last_seen_at);
      -- pso_ API tokens for scripts, by SHA-256.
      CREATE TABLE operator_tokens (
        id TEXT PRIMARY KEY,
        operator_id TEXT NOT NULL REFERENCES operators(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        token_hash BLOB NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        last_used_at INTEGER,
        revoked_at INTEGER
      );
      CREATE INDEX operator_tokens_operator ON operator_tokens(operator_id);
      -- Every state-changing console or CLI action. actor: an operator id, or 'cli'.
      CREATE TABLE audit_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        actor_email TEXT,
        action TEXT NOT NULL,
        target TEXT,
        client_ip TEXT,
        details TEXT
      );
      -- When each API key last authenticated a request (to the minute). Apart from api_keys so
      -- that recording it does not move the policy generation (store/policyCache.ts).
      CREATE TABLE api_key_usage (
        key_id TEXT PRIMARY KEY,
        last_used_at INTEGER NOT NULL
      ) WITHOUT ROWID;
      -- Each webhook attempt, for an endpoint's delivery log; pruned with the deliveries.
      CREATE TABLE webhook_attempts (
        seq INTEGER PRIMARY KEY,
        delivery_id TEXT NOT NULL,
        endpoint_id TEXT NOT NULL,
        type TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        attempted_at INTEGER NOT NULL,
        ok INTEGER NOT NULL,
        status_code INTEGER,
        duration_ms INTEGER,
        error TEXT
      );
      CREATE INDEX webhook_attempts_endpoint ON webhook_attempts(endpoint_id, seq);
      CREATE INDEX webhook_attempts_at ON webhook_attempts(attempted_at);
    `,
  },
  {
    version: 8,
    name: 'message bodies kept in the index: small messages need no spool file',
    sql: `
      -- The MIME of a message small enough to live in the index (spool.index_body_max_bytes),
      -- committed with its row in one transaction and removed with it; such a message's spool_path
      -- is ''.
      CREATE TABLE message_bodies (
        message_id TEXT PRIMARY KEY,
        mime BLOB NOT NULL
      );
    `,
  },
  {
    version: 9,
    name: 'nodes: the Postern processes serving this state, and their heartbeats',
    sql: `
      -- One row per node.id: written at start, its last_beat_at every node.heartbeat_seconds,
      -- stopped_at on a graceful stop. Whether a node is up is judged when read (operator/nodes.ts).
      CREATE TABLE nodes (
        id TEXT PRIMARY KEY,
        version TEXT NOT NULL,
        pid INTEGER NOT NULL,
        hostname TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        last_beat_at INTEGER NOT NULL,
        -- Its own node.heartbeat_seconds: it is judged missing by its interval, not the reader's.
        heartbeat_seconds INTEGER NOT NULL,
        -- JSON: [{name, protocol, host, port}], the listeners as bound.
        listeners TEXT NOT NULL,
        stopped_at INTEGER
      );
    `,
  },
  {
    version: 10,
    name: 'delivery leases owned by a node, provider throttles shared by nodes',
    sql: `
      -- The node holding a message's lease (its node.id) while it is sending. With several nodes a
      -- node whose lease ran out (it hung) must not record an outcome over the node that took the
      -- message since: the outcome write names its node. One node (this SQLite store) has no
      -- one else to fence off and leaves it NULL; the column is kept so both schemas stay equal.
      ALTER TABLE messages ADD COLUMN lease_owner TEXT;
      -- Accounts a provider asked to wait (a 429 with reset headers), until when: shared by the
      -- nodes, so three nodes do not hit a throttled provider three times as hard. One row per
      -- account, the latest until kept; a row whose time has passed is simply not resting.
      CREATE TABLE provider_throttles (
        account_id TEXT PRIMARY KEY,
        until INTEGER NOT NULL
      );
    `,
  },
  {
    version: 11,
    name: 'rate windows shared by nodes: the last events of each limiter and key',
    sql: `
      -- The sliding windows (policy/rateLimiter.ts) several nodes count together on PostgreSQL
      -- (store/rateWindows.ts). One node counts in memory: this SQLite store has the tables,
      -- unused, so both schemas stay equal. A row per limiter, its configuration and key; its
      -- last max_events event times in rate_window_slots, a ring: while filled < max_events
      -- the next event fills the slot numbered filled, then it overwrites the oldest, next_slot.
      CREATE TABLE rate_windows (
        id INTEGER PRIMARY KEY,
        limiter TEXT NOT NULL,
        max_events INTEGER NOT NULL,
        window_ms INTEGER NOT NULL,
        key TEXT NOT NULL,
        filled INTEGER NOT NULL,
        next_slot INTEGER NOT NULL,
        -- When the newest event leaves the window: from then on the row holds nothing and is pruned.
        expires_at INTEGER NOT NULL,
        UNIQUE (limiter, max_events, window_ms, key)
      );
      CREATE TABLE rate_window_slots (
        window_id INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (window_id, slot)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 12,
    name: 'webhook outbox shared by nodes: delivery leases owned by a node, events waiting for fan-out',
    sql: `
      -- The node holding a claimed delivery's lease (its node.id). With several nodes, one whose
      -- lease ran out must not record an outcome over the node that claimed the delivery since.
      -- This SQLite store has one dispatcher and leaves it NULL; kept so both schemas stay equal.
      ALTER TABLE webhook_deliveries ADD COLUMN lease_owner TEXT;
      -- Events committed and not yet fanned out: PostgreSQL's nodes take them from here
      -- (store/postgres/webhookOutbox.ts), since a cursor over seq misses events committed out
      -- of seq order. SQLite commits seqs in order and keeps following webhook_cursor; this table
      -- stays empty here, kept so both schemas stay equal.
      CREATE TABLE webhook_fanout_pending (
        event_seq INTEGER PRIMARY KEY
      );
    `,
  },
  {
    version: 13,
    name: 'viewer signing key shared by nodes',
    sql: `
      -- The key public viewer links are signed with, one for every node of a PostgreSQL cluster
      -- (policy/viewerKey.ts). One node keeps it in <state_dir>/viewer.key, as before: this
      -- SQLite store has the table, unused, so both schemas stay equal.
      CREATE TABLE viewer_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        secret BLOB NOT NULL CHECK (length(secret) = 32),
        created_at INTEGER NOT NULL
      );
    `,
  },
  {
    version: 14,
    name: 'rate windows: a take says which event it wrote, and an event can be given back',
    sql: `
      -- Each window numbers the events written to it, each slot holds its event's number:
      -- PostgreSQL's nodes name an event by its window and number, to give it back
      -- (store/rateWindows.ts). One node counts in memory: unused here, kept so both schemas
      -- stay equal.
      ALTER TABLE rate_windows ADD COLUMN writes INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE rate_window_slots ADD COLUMN write_id INTEGER;
    `,
  },
  {
    version: 15,
    name: 'operators: a generated password must be changed at first sign-in',
    sql: `
      -- 1 while the operator's password is one Postern generated (operator create, reset-password)
      -- and shown to whoever ran the command: the console API then allows nothing but changing it
      -- and signing out. Operators from before keep their passwords (0).
      ALTER TABLE operators ADD COLUMN must_change_password INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 16,
    name: 'TLS certificates from ACME shared by nodes: certificates, order attempts, account keys, challenges',
    sql: `
      -- What several nodes on PostgreSQL share for tls.acme (tls/acmeCertificates.ts): one node
      -- orders at a time and stores the certificate here; the others take it. A challenge any
      -- node may be asked for (the CA's validation reaches whichever node the name leads to) is
      -- here while its order runs. One node keeps its certificate and account key in
      -- <state_dir>/certs and its challenges in memory: this SQLite store has the tables, unused,
      -- so both schemas stay equal.
      CREATE TABLE tls_certificates (
        name TEXT PRIMARY KEY,
        -- The names the certificate covers, a JSON array in the config's order.
        domains TEXT NOT NULL,
        -- The private key, then the chain (PEM).
        pem TEXT NOT NULL,
        not_before INTEGER NOT NULL,
        not_after INTEGER NOT NULL,
        obtained_at INTEGER NOT NULL,
        obtained_by TEXT NOT NULL
      );
      -- The last order of a certificate's name that failed, and how many failed in a row since
      -- the last success: every node waits out the same backoff (a CA limits failed validations).
      CREATE TABLE tls_certificate_orders (
        name TEXT PRIMARY KEY,
        failures INTEGER NOT NULL,
        failed_at INTEGER NOT NULL,
        error TEXT NOT NULL,
        node_id TEXT NOT NULL
      );
      CREATE TABLE acme_accounts (
        directory_url TEXT PRIMARY KEY,
        private_key TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE acme_challenges (
        token TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('http-01', 'tls-alpn-01')),
        domain TEXT NOT NULL,
        key_authorization TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE INDEX acme_challenges_domain ON acme_challenges(domain, kind);
    `,
  },
  {
    version: 17,
    name: 'console: key names, sender display names, webhook answers and test bodies, viewer link records',
    sql: `
      -- A name for each API key ("billing worker"), so a list of hints can be told apart; '' for
      -- keys made before.
      ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
      -- The From display name ("Shop <shop@example.com>": Shop), for the console's From filter;
      -- NULL for messages accepted before, or without one.
      ALTER TABLE messages ADD COLUMN from_name TEXT;
      -- The start of the receiver's answer to each webhook attempt (its body, up to 1 KiB).
      ALTER TABLE webhook_attempts ADD COLUMN answer TEXT;
      -- The body of a delivery that has no outbox event (webhook.test): an outbox delivery's body
      -- is built again from its event, byte for byte.
      ALTER TABLE webhook_deliveries ADD COLUMN body TEXT;
      -- The delivery log in time order (attempts are recorded as they finish, not as they start).
      DROP INDEX webhook_attempts_endpoint;
      CREATE INDEX webhook_attempts_endpoint ON webhook_attempts(endpoint_id, attempted_at, seq);
      -- Every public viewer link made (operator/messageLinks.ts): its token names its id, and a
      -- link opens only while its row is here and not revoked. The token itself is never stored.
      CREATE TABLE viewer_links (
        id TEXT PRIMARY KEY,
        message_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        revoked_at INTEGER,
        -- An operator id, or 'cli'; and the operator's email then.
        created_by TEXT NOT NULL,
        created_by_email TEXT
      );
      CREATE INDEX viewer_links_message ON viewer_links(message_id);
    `,
  },
];

/** Migration 6's triggers: any change to a policy table moves the generation. */
function policyGenerationTriggers(): string {
  return ['api_keys', 'projects', 'provider_accounts', 'dkim_keys']
    .flatMap((table) =>
      ['INSERT', 'UPDATE', 'DELETE'].map(
        (op) =>
          `CREATE TRIGGER policy_generation_${table}_${op.toLowerCase()} AFTER ${op} ON ${table} BEGIN UPDATE policy_generation SET n = n + 1; END;`,
      ),
    )
    .join('\n');
}
