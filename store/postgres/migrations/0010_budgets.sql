-- Spending windows (issue 22). budgets: an operator's limits, in units, of
-- a key's or a user's windows (subject "key:<id>" or "user:<id>", window
-- 5h, daily, weekly, monthly or lifetime). user_budgets: a user's budget
-- group and plan (plan_until in unix milliseconds, 0 for no end).
-- window_spend: committed spend per window period ("user:3/daily@2026-11-26",
-- "key:5/5h@<unix of the 5-minute bucket>"), added to by the usage batch
-- that commits the rows. usage_logs.windows: the ids a row counted against;
-- usage_logs.plan: the plan that paid it (no balance is charged).
CREATE TABLE budgets (
	subject     TEXT NOT NULL,
	window_kind TEXT NOT NULL,
	limit_units BIGINT NOT NULL,
	PRIMARY KEY (subject, window_kind)
);
CREATE TABLE user_budgets (
	user_id      BIGINT PRIMARY KEY,
	budget_group TEXT NOT NULL DEFAULT '',
	plan         TEXT NOT NULL DEFAULT '',
	plan_until   BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE window_spend (
	window_id TEXT PRIMARY KEY,
	spent     BIGINT NOT NULL
);
ALTER TABLE usage_logs ADD COLUMN windows TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_logs ADD COLUMN plan TEXT NOT NULL DEFAULT '';
-- A redemption code may grant a plan for plan_days instead of quota.
ALTER TABLE redemption_codes ADD COLUMN plan TEXT NOT NULL DEFAULT '';
ALTER TABLE redemption_codes ADD COLUMN plan_days BIGINT NOT NULL DEFAULT 0;
-- window_claims: what instances claimed of a window's room before admitting
-- against it in memory (a row per period, and a lock row per window named
-- "<subject>/<window>" that serializes claims); the sum over a window's
-- periods never exceeds its limit when a claim is granted.
CREATE TABLE window_claims (
	window_id TEXT PRIMARY KEY,
	claimed   BIGINT NOT NULL
);
