-- Accounts and the web console.

-- Redemption codes an administrator can disable, and that can expire.
ALTER TABLE redemption_codes ADD COLUMN status TEXT NOT NULL DEFAULT 'enabled';
ALTER TABLE redemption_codes ADD COLUMN expires_at BIGINT; -- NULL: never expires

-- Spend per user per UTC day (day = unix milliseconds / 86400000), kept up
-- to date by every settled batch, so the 30-day chart reads at most 30 rows
-- however many requests a user makes.
CREATE TABLE usage_daily (
    user_id  BIGINT NOT NULL,
    day      BIGINT NOT NULL,
    cost     BIGINT NOT NULL DEFAULT 0,
    requests BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
) WITHOUT ROWID; -- SQLite's: the rows live in the key's order, so a chart is
                 -- one range read (PostgreSQL: drop the clause)
INSERT INTO usage_daily (user_id, day, cost, requests)
    SELECT user_id, created_at / 86400000, SUM(cost), COUNT(*)
    FROM usage_logs GROUP BY user_id, created_at / 86400000;

-- A user's usage filtered by model, newest first, paged by (created_at, id).
-- (Without a filter, usage_logs_user_id_created_at serves: SQLite indexes
-- end in the rowid, which is id.)
CREATE INDEX usage_logs_user_id_model_created_at ON usage_logs (user_id, model, created_at, id);
