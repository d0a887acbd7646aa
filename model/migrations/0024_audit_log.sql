-- The audit log (issue 46, docs/api.md "Audit log"): one row per change an account's webhooks,
-- notification endpoints, API keys and portal links went through, and per manual retry, recovery
-- and replay, with who made it. variant is '' for a change of the whole account (an API key),
-- which both variants list. actor_kind is api_key, portal or cli; actor_id the key's id or the
-- portal session's id (never the session's secret), '' for the CLI; actor_label the key's owner
-- e-mail, the session's mode or the CLI command. changes is a JSON object of the fields changed:
-- {"old", "new"} for a plain field, {"redacted": true} for a secret or header value, which is never
-- stored. Rows older than WEBHOOKD_RETENTION are purged with the delivery history.
CREATE TABLE audit_log (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    variant TEXT NOT NULL,
    at {{ts}} NOT NULL,
    actor_kind TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    actor_label TEXT NOT NULL,
    action TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target_id TEXT NOT NULL,
    changes TEXT NOT NULL
);
CREATE INDEX audit_log_account ON audit_log (account_id, variant, id);
CREATE INDEX audit_log_at ON audit_log (at, id);
