-- Custom headers per webhook (issue 31). webhooks.headers is the webhook's headers as one JSON
-- object of names and values, sealed with the SecretBox as a signing secret is (their values may
-- be credentials), or NULL for none.
ALTER TABLE webhooks ADD COLUMN headers TEXT;
