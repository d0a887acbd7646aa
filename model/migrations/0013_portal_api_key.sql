-- Which API key asked for each portal link (issue 27): revoking the key revokes its unused links
-- and ends the sessions they opened (RevokeAPIKey), and a link whose key is revoked does not open.
-- NULL: a link an operator made (webhookd portal-link), or one made before this column; no key's
-- revocation touches those. A session reaches its key through link_id, hence its index.
ALTER TABLE portal_links ADD COLUMN api_key_id BIGINT REFERENCES api_keys (id);
CREATE INDEX portal_links_api_key ON portal_links (api_key_id);
CREATE INDEX portal_sessions_link ON portal_sessions (link_id);
