-- Health notices (issue 30, docs/notifications.md). A notification endpoint is a row of webhooks
-- whose kind is not 'webhook': 'notice-webhook' (an operational webhook, signed), 'notice-chat' (a
-- chat incoming webhook) or 'notice-email' (the owner's e-mail). The engine delivers notices to
-- them as it delivers events to webhooks: retries, isolation and the attempt log come with it.
-- notice_types lists the notice types a channel wants, comma-separated (NULL: every type but
-- delivery.exhausted). event_type is '' for a channel: no event type's subscribers include it.
ALTER TABLE webhooks ADD COLUMN kind TEXT NOT NULL DEFAULT 'webhook';
ALTER TABLE webhooks ADD COLUMN notice_types TEXT;
-- The state of a webhook's notices: alerted_at (0001) is set while webhook.failing has been sent
-- and no webhook.recovered yet; warned_at once webhook.disabling has been sent in the current
-- failure; quiet_until ends the storm rule's quiet period that a failing/recovered pair starts,
-- during which transitions are counted in suppressed_notices and summarised by the next notice.
ALTER TABLE webhooks ADD COLUMN warned_at {{ts}};
ALTER TABLE webhooks ADD COLUMN quiet_until {{ts}};
ALTER TABLE webhooks ADD COLUMN suppressed_notices INTEGER NOT NULL DEFAULT 0;
CREATE INDEX webhooks_channels ON webhooks (account_id, variant, kind);
-- A notice is an event about a webhook (about_webhook_id): it never shows in the event log, and
-- the portal lists an account's notices by it.
ALTER TABLE events ADD COLUMN about_webhook_id BIGINT;
CREATE INDEX events_notices ON events (account_id, about_webhook_id, id);
-- The sweeper reads the quiet periods that have ended (EndQuietPeriods).
CREATE INDEX webhooks_quiet ON webhooks (quiet_until) WHERE quiet_until IS NOT NULL;
-- An account has one e-mail channel per variant, ever (deleting it turns the e-mail off): the
-- notices of two webhooks made at once must not create two.
CREATE UNIQUE INDEX webhooks_email_channel ON webhooks (account_id, variant) WHERE kind = 'notice-email';
