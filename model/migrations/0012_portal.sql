-- The owner's portal (issue 20): a signed link carries a single-use token for one account and one
-- variant; opening it exchanges the token for a session. Both are stored only as the SHA-256 of
-- their random value. They are the account's own credential, apart from its API keys: revoking a key
-- ends no session, revoked_at (set by RevokePortalAccess) does.
CREATE TABLE portal_links (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    variant TEXT NOT NULL,
    read_only BOOLEAN NOT NULL,
    token_hash TEXT NOT NULL,
    created_at {{ts}} NOT NULL,
    expires_at {{ts}} NOT NULL,
    used_at {{ts}},
    revoked_at {{ts}}
);
CREATE UNIQUE INDEX portal_links_token_hash ON portal_links (token_hash);
CREATE INDEX portal_links_account ON portal_links (account_id);

CREATE TABLE portal_sessions (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    link_id BIGINT NOT NULL REFERENCES portal_links (id),
    variant TEXT NOT NULL,
    read_only BOOLEAN NOT NULL,
    session_hash TEXT NOT NULL,
    created_at {{ts}} NOT NULL,
    expires_at {{ts}} NOT NULL,
    revoked_at {{ts}}
);
CREATE UNIQUE INDEX portal_sessions_session_hash ON portal_sessions (session_hash);
CREATE INDEX portal_sessions_account ON portal_sessions (account_id);
