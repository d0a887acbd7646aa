-- Payload filters (issue 29). webhooks.filter is a webhook's filter as stored: canonical JSON, or
-- NULL for none. events.filtered counts the webhooks subscribed to the event's type whose filters
-- refused it when it was accepted: they got no delivery.
ALTER TABLE webhooks ADD COLUMN filter TEXT;
ALTER TABLE events ADD COLUMN filtered INTEGER NOT NULL DEFAULT 0;
