-- Retention (WEBHOOKD_RETENTION): the purge walks events and deliveries oldest first, a batch of
-- rows at a time from where the last batch stopped (created_at, id), and stops at the cutoff. The
-- index on created_at, which never changes, rather than on updated_at: on PostgreSQL an index on
-- updated_at would make every delivery update (each attempt writes one) a non-HOT update.
-- Attempts are found through their delivery (delivery_attempts_delivery_attempt).
--
-- IF NOT EXISTS lets an operator with large tables build these beforehand without blocking writes
-- (CREATE INDEX CONCURRENTLY, same names; docs/operations.md): this migration runs in a
-- transaction, where PostgreSQL's CREATE INDEX holds off inserts until it is built.
CREATE INDEX IF NOT EXISTS events_created ON events (created_at, id);
CREATE INDEX IF NOT EXISTS deliveries_created ON deliveries (created_at, id);
