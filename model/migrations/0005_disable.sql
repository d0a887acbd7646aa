-- Disabling webhooks (issue 7): by the owner over the API, or by the service when a webhook has
-- failed without a single success for a sustained period. A disabled webhook gets no attempts.

-- disabled_at is set while the webhook is disabled (NULL: enabled), in both variants; variant B's
-- status also reads disabled meanwhile. disabled_reason says who disabled it: auto or manual.
ALTER TABLE webhooks ADD COLUMN disabled_at {{ts}};
ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT CHECK (disabled_reason IN ('auto', 'manual'));
-- failing_since is the start of the oldest failed attempt since the last success (NULL after a
-- success), exhausted_count the deliveries exhausted since then: together they decide auto-disable.
ALTER TABLE webhooks ADD COLUMN failing_since {{ts}};
ALTER TABLE webhooks ADD COLUMN exhausted_count INTEGER NOT NULL DEFAULT 0;

-- Only the service could set variant B's disabled before this column existed.
UPDATE webhooks SET disabled_at = updated_at, disabled_reason = 'auto' WHERE status = 'disabled';
