-- Placeholders: {{id}} is the auto-incrementing primary key and {{ts}} a UTC timestamp column type of
-- the dialect, so one file serves SQLite and PostgreSQL. Statements end with ";" at the end of a line.

CREATE TABLE accounts (
    id {{id}},
    owner_email TEXT NOT NULL,
    created_at {{ts}} NOT NULL
);
CREATE UNIQUE INDEX accounts_owner_email ON accounts (owner_email);

CREATE TABLE api_keys (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL DEFAULT '',
    lookup TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    created_at {{ts}} NOT NULL,
    revoked_at {{ts}}
);
CREATE UNIQUE INDEX api_keys_lookup ON api_keys (lookup);

CREATE TABLE webhooks (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    variant TEXT NOT NULL,
    url TEXT NOT NULL,
    event_type TEXT NOT NULL,
    status TEXT NOT NULL,
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_secret_expires_at {{ts}},
    created_at {{ts}} NOT NULL,
    updated_at {{ts}} NOT NULL,
    last_triggered_at {{ts}},
    last_status TEXT,
    failure_count INTEGER NOT NULL DEFAULT 0,
    -- status_at is the start time of the delivery attempt that last set status: an older attempt
    -- finishing late must not overwrite a newer one's outcome.
    status_at {{ts}},
    -- last_success_at is the start of the newest successful attempt: an exhaustion older than it
    -- must not mark a healed webhook failing.
    last_success_at {{ts}},
    -- alerted_at is set when the owner was alerted and cleared by the next success, so one move
    -- into failing sends one e-mail.
    alerted_at {{ts}},
    deleted_at {{ts}}
);
CREATE INDEX webhooks_account_variant ON webhooks (account_id, variant, id) WHERE deleted_at IS NULL;
CREATE INDEX webhooks_subscribers ON webhooks (account_id, variant, event_type) WHERE deleted_at IS NULL;

CREATE TABLE events (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    variant TEXT NOT NULL,
    event_type TEXT NOT NULL,
    data TEXT NOT NULL,
    idempotency_key TEXT,
    request_hash TEXT,
    matched INTEGER NOT NULL DEFAULT 0,
    occurred_at {{ts}} NOT NULL,
    created_at {{ts}} NOT NULL
);
CREATE UNIQUE INDEX events_idempotency ON events (account_id, variant, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE deliveries (
    id {{id}},
    event_id BIGINT NOT NULL REFERENCES events (id),
    webhook_id BIGINT NOT NULL REFERENCES webhooks (id),
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    next_attempt_at {{ts}},
    -- dispatched_at is set once the delivery workflow exists; rows without it are the outbox that
    -- the worker sweeps after a crash between commit and workflow start.
    dispatched_at {{ts}},
    created_at {{ts}} NOT NULL,
    updated_at {{ts}} NOT NULL
);
CREATE UNIQUE INDEX deliveries_event_webhook ON deliveries (event_id, webhook_id);
CREATE INDEX deliveries_undispatched ON deliveries (created_at) WHERE dispatched_at IS NULL;
CREATE INDEX deliveries_webhook ON deliveries (webhook_id, id);

CREATE TABLE delivery_attempts (
    id {{id}},
    delivery_id BIGINT NOT NULL REFERENCES deliveries (id),
    attempt INTEGER NOT NULL,
    url TEXT NOT NULL,
    started_at {{ts}} NOT NULL,
    status_code INTEGER,
    error_class TEXT,
    error TEXT,
    latency_ms BIGINT NOT NULL,
    response_body TEXT
);
CREATE UNIQUE INDEX delivery_attempts_delivery_attempt ON delivery_attempts (delivery_id, attempt);
