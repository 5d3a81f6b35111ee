-- Usage rows carry a key unique to the request, so a batch replayed from a
-- gateway's journal, by it or by another instance, is applied exactly once:
-- a row whose key is already here is skipped, and so is its charge. NULL
-- for rows that need no key (UNIQUE ignores NULLs).
ALTER TABLE usage_logs ADD COLUMN row_key TEXT;
CREATE UNIQUE INDEX usage_logs_row_key ON usage_logs (row_key);

-- Per-key and per-user rate limits; 0 means the gateway-wide default.
ALTER TABLE users ADD COLUMN rpm BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN tpm BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN max_parallel BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN rpm BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN tpm BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN max_parallel BIGINT NOT NULL DEFAULT 0;
