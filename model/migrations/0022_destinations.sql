-- Destinations beyond HTTP (issue 44, docs/destinations.md). webhooks.destination is the JSON of a
-- destination's settings that are not secret ({"type": "nats", "subject": "orders"}), NULL for an
-- HTTPS endpoint; destination_credentials is secretbox ciphertext of its secrets (the URL user's
-- password, a token, an AWS secret key), NULL for none.
ALTER TABLE webhooks ADD COLUMN destination TEXT;
ALTER TABLE webhooks ADD COLUMN destination_credentials TEXT;
