-- The usage store at 50 million rows (issue 34).
--
-- The dashboard's and the channels page's sums per UTC day and per channel,
-- model, user or key (grp is the store.UsageGroup: channel, model, user_id,
-- token_id; key the channel or model, or the id in decimal), added to by
-- every batch that writes usage rows, in its transaction: the pages read a
-- few hundred rows whatever the usage log holds, and the sums outlive
-- usage retention, like usage_daily and usage_daily_models.
CREATE TABLE usage_daily_totals (
    grp           TEXT   NOT NULL,
    day           BIGINT NOT NULL,
    key           TEXT   NOT NULL,
    requests      BIGINT NOT NULL DEFAULT 0,
    errors        BIGINT NOT NULL DEFAULT 0,
    cost          BIGINT NOT NULL DEFAULT 0,
    tokens        BIGINT NOT NULL DEFAULT 0,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    cached_tokens BIGINT NOT NULL DEFAULT 0,
    latency_ms    BIGINT NOT NULL DEFAULT 0,
    ttfb_ms       BIGINT NOT NULL DEFAULT 0,
    cache_hits    BIGINT NOT NULL DEFAULT 0,
    cache_saved   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (grp, day, key)
) WITHOUT ROWID;

-- the history written before this table existed
INSERT INTO usage_daily_totals (grp, day, key, requests, errors, cost, tokens, prompt_tokens,
    cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved)
SELECT 'channel', created_at / 86400000, channel, COUNT(*), SUM(status < 200 OR status >= 300), SUM(cost),
    SUM(prompt_tokens + completion_tokens), SUM(prompt_tokens), SUM(cached_tokens), SUM(latency_ms),
    SUM(ttfb_ms), SUM(cache_hit), SUM(cache_saved)
FROM usage_logs GROUP BY 2, 3;
INSERT INTO usage_daily_totals (grp, day, key, requests, errors, cost, tokens, prompt_tokens,
    cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved)
SELECT 'model', created_at / 86400000, model, COUNT(*), SUM(status < 200 OR status >= 300), SUM(cost),
    SUM(prompt_tokens + completion_tokens), SUM(prompt_tokens), SUM(cached_tokens), SUM(latency_ms),
    SUM(ttfb_ms), SUM(cache_hit), SUM(cache_saved)
FROM usage_logs GROUP BY 2, 3;
INSERT INTO usage_daily_totals (grp, day, key, requests, errors, cost, tokens, prompt_tokens,
    cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved)
SELECT 'user_id', created_at / 86400000, CAST(user_id AS TEXT), COUNT(*), SUM(status < 200 OR status >= 300), SUM(cost),
    SUM(prompt_tokens + completion_tokens), SUM(prompt_tokens), SUM(cached_tokens), SUM(latency_ms),
    SUM(ttfb_ms), SUM(cache_hit), SUM(cache_saved)
FROM usage_logs GROUP BY 2, 3;
INSERT INTO usage_daily_totals (grp, day, key, requests, errors, cost, tokens, prompt_tokens,
    cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved)
SELECT 'token_id', created_at / 86400000, CAST(token_id AS TEXT), COUNT(*), SUM(status < 200 OR status >= 300), SUM(cost),
    SUM(prompt_tokens + completion_tokens), SUM(prompt_tokens), SUM(cached_tokens), SUM(latency_ms),
    SUM(ttfb_ms), SUM(cache_hit), SUM(cache_saved)
FROM usage_logs GROUP BY 2, 3;

-- The operators' usage log filtered by model alone, newest first: without
-- it the listing walks usage_logs_created_at until it finds a page of the
-- model, the whole table for a model not used lately. (A SQLite index ends
-- in the rowid, id, so ORDER BY created_at DESC, id DESC needs no sort;
-- naming id again would store it twice, 4 bytes a row.)
CREATE INDEX usage_logs_model_created_at ON usage_logs (model, created_at);

-- A user's models by day (the user page's model_contains, DailyUsageByModel
-- of one user): the table's key begins with the day, so without this a
-- user's read walks every user's days.
CREATE INDEX usage_daily_models_user_id_day ON usage_daily_models (user_id, day);
