-- Realtime client secrets: short-lived secrets a key mints for browsers
-- (POST /v1/realtime/client_secrets), kept by hash, bound to the token that
-- pays for them; expires_at in unix milliseconds. Expired rows are deleted
-- when the next secret is minted.
CREATE TABLE client_secrets (
	id_hash    TEXT PRIMARY KEY,
	token_id   BIGINT NOT NULL,
	model      TEXT NOT NULL DEFAULT '',
	session    TEXT NOT NULL DEFAULT '',
	expires_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX client_secrets_expires_at ON client_secrets (expires_at);
