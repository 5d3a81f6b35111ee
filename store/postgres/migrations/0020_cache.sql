-- The response cache: a usage row answered from it says so, with what the
-- answer would have cost beyond what the hit was charged (the console's
-- hit rate and money saved per model and key).
ALTER TABLE usage_logs ADD COLUMN cache_hit BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE usage_logs ADD COLUMN cache_saved BIGINT NOT NULL DEFAULT 0;

-- The response cache's entries when several instances share them (cache {
-- store database }): keyed by the request's hash, the entry opaque to the
-- store, bounded by the cache's max_bytes (least recently used evicted).
CREATE TABLE response_cache (
    key        TEXT PRIMARY KEY,
    entry      BYTEA NOT NULL,
    size       BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT NOT NULL
);
CREATE INDEX response_cache_used_at ON response_cache (used_at);
