-- Authentication to the receiver (issue 31, part 2). webhooks.auth is the webhook's receiver
-- authentication (Basic, or an OAuth2 client-credentials grant) as one JSON object, sealed with
-- the SecretBox as a signing secret is (it holds a password or a client secret), or NULL for none.
ALTER TABLE webhooks ADD COLUMN auth TEXT;
