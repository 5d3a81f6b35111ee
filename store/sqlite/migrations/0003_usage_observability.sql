-- Request ids on usage rows, and daily spend that outlives usage retention.

-- The gateway's id for the request (X-Request-Id in and out, in the access
-- log) and the upstream's own, to match a row against the vendor's invoice.
ALTER TABLE usage_logs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_logs ADD COLUMN upstream_request_id TEXT NOT NULL DEFAULT '';

-- One row per UTC day, user and model, with tokens: the detail beside
-- usage_daily's spend per user and day. Both are kept when retention deletes
-- usage_logs rows. day is days since 1970-01-01 (created_at / 86400000).
CREATE TABLE usage_daily_models (
    day               BIGINT  NOT NULL,
    user_id           BIGINT  NOT NULL,
    model             TEXT    NOT NULL,
    requests          BIGINT  NOT NULL DEFAULT 0,
    prompt_tokens     BIGINT  NOT NULL DEFAULT 0,
    completion_tokens BIGINT  NOT NULL DEFAULT 0,
    cached_tokens     BIGINT  NOT NULL DEFAULT 0,
    reasoning_tokens  BIGINT  NOT NULL DEFAULT 0,
    cost              BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (day, user_id, model)
);

-- the history written before this table existed
INSERT INTO usage_daily_models (day, user_id, model, requests, prompt_tokens, completion_tokens,
    cached_tokens, reasoning_tokens, cost)
SELECT created_at / 86400000, user_id, model, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens),
    SUM(cached_tokens), SUM(reasoning_tokens), SUM(cost)
FROM usage_logs GROUP BY created_at / 86400000, user_id, model;
