-- Versioned payloads (issue 32, part 4; docs/events.md, "Versions"). events.version is the version
-- of its type's data shape that the event's data is written in (the newest when it was accepted);
-- webhooks.version the version its receiver gets, every event converted down to it. Everything
-- before this migration was version 1.
ALTER TABLE events ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE webhooks ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
