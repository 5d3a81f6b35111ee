-- Budget alerts: one row per crossing of a threshold (a percentage of a
-- spending window, a balance or a key's limit). The unique key is the
-- claim that makes one instance, and one only, announce a crossing; the
-- row is also the outbox its webhook is delivered from (pending until
-- sent, or failed after bounded attempts). Times in unix milliseconds,
-- 0 for none.
CREATE TABLE alerts (
	id          TEXT PRIMARY KEY,
	subject     TEXT NOT NULL,
	window_name TEXT NOT NULL,
	period      TEXT NOT NULL,
	threshold   INTEGER NOT NULL,
	user_id     BIGINT NOT NULL,
	token_id    BIGINT NOT NULL DEFAULT 0,
	spent       BIGINT NOT NULL,
	limit_units BIGINT NOT NULL,
	created_at  BIGINT NOT NULL,
	status      TEXT NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0,
	next_at     BIGINT NOT NULL DEFAULT 0,
	lease_until BIGINT NOT NULL DEFAULT 0,
	sent_at     BIGINT NOT NULL DEFAULT 0,
	last_error  TEXT NOT NULL DEFAULT '',
	UNIQUE (subject, period, threshold)
);
CREATE INDEX alerts_due ON alerts (status, next_at);
CREATE INDEX alerts_user ON alerts (user_id, created_at);
CREATE INDEX alerts_created ON alerts (created_at);

-- The thresholds a user set on a key ("50,80"), apart from tokens so
-- that a key without any costs nothing.
CREATE TABLE key_alert_thresholds (
	token_id   BIGINT PRIMARY KEY,
	thresholds TEXT NOT NULL
);
