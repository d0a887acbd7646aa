-- Per-endpoint limits a webhook's owner may set (issue 17): rate_limit caps deliveries per second to
-- the webhook's URL, max_in_flight caps its attempts in flight at once. NULL means the worker's
-- defaults (no rate limit; WEBHOOKD_ENDPOINT_CONCURRENCY in flight).
ALTER TABLE webhooks ADD COLUMN rate_limit INTEGER;
ALTER TABLE webhooks ADD COLUMN max_in_flight INTEGER;
