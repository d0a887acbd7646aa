-- The event log (GET <prefix>/events) pages through one account's events of one variant by id.
--
-- IF NOT EXISTS lets an operator with a large table build it beforehand without blocking writes
-- (CREATE INDEX CONCURRENTLY, same name; docs/operations.md), as for 0007.
CREATE INDEX IF NOT EXISTS events_account_variant ON events (account_id, variant, id);
