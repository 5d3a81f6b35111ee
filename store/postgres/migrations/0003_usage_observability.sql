-- Request ids on usage rows, and daily totals that outlive usage retention
-- (store/sqlite's 0003, without its backfill: see 0002).

ALTER TABLE usage_logs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_logs ADD COLUMN upstream_request_id TEXT NOT NULL DEFAULT '';

-- One row per UTC day, user and model, with tokens. day is days since
-- 1970-01-01 (created_at / 86400000).
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
