-- Accounts and the web console (store/sqlite's 0002). A PostgreSQL
-- database starts at 0001 with no rows, so SQLite's backfill of
-- usage_daily from older usage rows has nothing to do here.

ALTER TABLE redemption_codes ADD COLUMN status TEXT NOT NULL DEFAULT 'enabled';
ALTER TABLE redemption_codes ADD COLUMN expires_at BIGINT; -- NULL: never expires

-- Spend per user per UTC day (day = unix milliseconds / 86400000), kept up
-- to date by every settled batch, so the 30-day chart reads at most 30 rows.
CREATE TABLE usage_daily (
    user_id  BIGINT NOT NULL,
    day      BIGINT NOT NULL,
    cost     BIGINT NOT NULL DEFAULT 0,
    requests BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
);

-- A user's usage filtered by model, newest first, paged by (created_at, id).
CREATE INDEX usage_logs_user_id_model_created_at ON usage_logs (user_id, model, created_at, id);
