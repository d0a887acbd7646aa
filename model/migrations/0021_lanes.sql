-- Ordered lanes (issue 43, docs/ordering.md). webhooks.ordering_key is the dotted path into the
-- delivered body whose value names an event's lane (NULL: the webhook is not ordered). A lane is
-- one (webhook, key value): lane_key is the value's JSON text, '' for the events whose body lacks it.
-- last_seq is the sequence number of the newest delivery the lane was given, done_seq the one its
-- lane workflow last finished (delivered, or skipped by its owner). Intake takes the lane's row lock
-- before it inserts the event, so a lane's numbers follow its events' ids.
ALTER TABLE webhooks ADD COLUMN ordering_key TEXT;
CREATE TABLE lanes (
    id {{id}},
    webhook_id BIGINT NOT NULL,
    lane_key TEXT NOT NULL,
    last_seq BIGINT NOT NULL,
    done_seq BIGINT NOT NULL DEFAULT 0,
    created_at {{ts}} NOT NULL,
    updated_at {{ts}} NOT NULL
);
CREATE UNIQUE INDEX lanes_webhook_key ON lanes (webhook_id, lane_key);
-- A delivery of an ordered webhook names its lane and its number in it.
ALTER TABLE deliveries ADD COLUMN lane_id BIGINT;
ALTER TABLE deliveries ADD COLUMN lane_seq BIGINT;
CREATE INDEX deliveries_lane ON deliveries (lane_id, lane_seq) WHERE lane_id IS NOT NULL;
