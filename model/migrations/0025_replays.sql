-- Replays (issue 46, docs/api.md "Replays"): a replay sends again the deliveries of an account that
-- its criteria (JSON: the window, event types, webhooks, states, status classes, payload filter)
-- matched when it was created. replay_items holds those deliveries' ids, fixed then, so that what
-- a dry run counts is what the replay walks; after_id is the last of them the replay has handled,
-- written in the same transaction as that delivery's claim, so a replay resumed after a crash never
-- claims a delivery twice. The items go when the replay ends (done or canceled); its counts stay.
CREATE TABLE replays (
    id {{id}},
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    variant TEXT NOT NULL,
    criteria TEXT NOT NULL,
    state TEXT NOT NULL,
    matched BIGINT NOT NULL,
    sent BIGINT NOT NULL DEFAULT 0,
    skipped BIGINT NOT NULL DEFAULT 0,
    after_id BIGINT NOT NULL DEFAULT 0,
    created_at {{ts}} NOT NULL,
    finished_at {{ts}}
);
CREATE INDEX replays_account ON replays (account_id, variant, id);

CREATE TABLE replay_items (
    replay_id BIGINT NOT NULL REFERENCES replays (id),
    delivery_id BIGINT NOT NULL,
    PRIMARY KEY (replay_id, delivery_id)
);
