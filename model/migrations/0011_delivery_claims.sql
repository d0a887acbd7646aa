-- A manual retry (webhook-wide, recovery or resend) claims each delivery right before it signals or
-- starts the delivery's workflow, and clears the claim once that call succeeded (issue 18). A claim
-- left set is a process that died between the two: the worker's sweeper finds it after a grace and
-- hands the delivery to its workflow again (docs/operations.md, "Claims and their repair").
ALTER TABLE deliveries ADD COLUMN claimed_at {{ts}};
CREATE INDEX deliveries_claimed ON deliveries (claimed_at) WHERE claimed_at IS NOT NULL;
