-- Websites of variant B accounts (issue 4): publishing and archiving emit website events.

CREATE TABLE websites (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    brand_id BIGINT NOT NULL,
    slug TEXT NOT NULL,
    status TEXT NOT NULL,
    scheduled_at {{ts}},
    published_at {{ts}},
    archived_at {{ts}},
    created_at {{ts}} NOT NULL,
    updated_at {{ts}} NOT NULL
);
CREATE INDEX websites_account ON websites (account_id, id);
