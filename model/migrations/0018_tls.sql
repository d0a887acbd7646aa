-- TLS per webhook (issue 31, part 3). webhooks.tls is the webhook's TLS settings toward its
-- receiver (a CA bundle to trust beside the system roots, a client certificate and its private
-- key) as one JSON object, sealed with the SecretBox as a signing secret is (it holds a private
-- key), or NULL for none. webhooks.tls_expires_at is the earliest notAfter of those certificates,
-- in the clear (representations show it anyway), so the expiring-certificates gauge is one count.
ALTER TABLE webhooks ADD COLUMN tls TEXT;
ALTER TABLE webhooks ADD COLUMN tls_expires_at {{ts}};
