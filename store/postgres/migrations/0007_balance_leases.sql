-- A balance lease is one gateway instance's claim on a slice of a user's
-- quota (kind 0) or of a token's own limit (kind 1), which it admits
-- requests against in memory. Balances are charged only by settled costs;
-- a lease only keeps other instances from leasing what it claims, until
-- expires_at (unix milliseconds), after which it counts for nothing.
CREATE TABLE balance_leases (
	kind       SMALLINT NOT NULL,
	account_id BIGINT NOT NULL,
	owner      TEXT NOT NULL,
	amount     BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (kind, account_id, owner)
);
CREATE INDEX balance_leases_expires ON balance_leases (expires_at);
