-- Each gateway instance reports its use of a key's (kind 1) or a user's
-- (kind 0) rate limits: requests admitted and tokens used in the last
-- minute, requests in flight now. The others read the live reports
-- (expires_at in unix milliseconds still ahead) and admit, from memory,
-- their share of what is left.
CREATE TABLE rate_use (
	kind       SMALLINT NOT NULL,
	key_id     BIGINT NOT NULL,
	owner      TEXT NOT NULL,
	requests   BIGINT NOT NULL,
	tokens     BIGINT NOT NULL,
	parallel   BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (kind, key_id, owner)
);
