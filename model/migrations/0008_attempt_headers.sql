-- What each attempt sent: its request headers as a JSON object, without webhook-signature, so the
-- delivery log shows a user what their receiver got. Attempts made before this column existed keep
-- NULL.
ALTER TABLE delivery_attempts ADD COLUMN request_headers TEXT;
