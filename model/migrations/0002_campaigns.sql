-- Campaigns of variant A accounts (issue 4): their creation and changes emit campaign events.

CREATE TABLE campaigns (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    platform TEXT NOT NULL,
    status TEXT NOT NULL,
    budget DOUBLE PRECISION NOT NULL,
    start_date {{ts}} NOT NULL,
    end_date {{ts}} NOT NULL,
    created_at {{ts}} NOT NULL,
    updated_at {{ts}} NOT NULL
);
CREATE INDEX campaigns_account ON campaigns (account_id, id);
