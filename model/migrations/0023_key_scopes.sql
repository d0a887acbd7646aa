-- Scoped API keys (issue 46; docs/api.md, "Scoped API keys"): what a key may do. read may only
-- read, publish may publish events and read the event log, manage may do everything. Keys issued
-- before scopes keep what they could do: the default makes them manage.
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'manage' CHECK (scope IN ('read', 'publish', 'manage'));
