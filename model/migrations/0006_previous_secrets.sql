-- Several rotated-out secrets (issue 8): a second rotation within the overlap no longer drops the
-- secret the first one promised until its expiry. Each rotated-out secret keeps its own expiry; at
-- most model.MaxPreviousSecrets of them sign at once (a further rotation is refused until the oldest
-- expires), and expired rows are deleted by the next rotation.

-- secret is SecretBox ciphertext, like webhooks.secret.
CREATE TABLE webhook_previous_secrets (
    id {{id}},
    webhook_id BIGINT NOT NULL REFERENCES webhooks (id),
    secret TEXT NOT NULL,
    expires_at {{ts}} NOT NULL,
    created_at {{ts}} NOT NULL
);
CREATE INDEX webhook_previous_secrets_webhook ON webhook_previous_secrets (webhook_id, expires_at);

-- The one previous secret of the old columns moves here, expired or not (the next rotation prunes
-- it). The columns stay, no longer read or written, so a binary of before this migration still
-- starts against the schema; they are cleared so no secret lives in two places.
INSERT INTO webhook_previous_secrets (webhook_id, secret, expires_at, created_at)
    SELECT id, previous_secret, previous_secret_expires_at, updated_at
    FROM webhooks WHERE previous_secret IS NOT NULL AND previous_secret_expires_at IS NOT NULL;
UPDATE webhooks SET previous_secret = NULL, previous_secret_expires_at = NULL;
