-- Self-serve top-ups through a payment provider (store/payments.go): a
-- payment is stored pending when its checkout starts and moved by the
-- provider's events. payment_events keeps every applied event's id, so a
-- replayed event is refused by the primary key in the transaction that
-- would apply it again. Amounts are integers: units (1,000,000 = 1 USD)
-- and the currency's smallest unit; times in unix milliseconds.
CREATE TABLE payments (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	provider   TEXT NOT NULL,
	reference  TEXT NOT NULL UNIQUE,
	user_id    BIGINT NOT NULL,
	item       TEXT NOT NULL,
	units      BIGINT NOT NULL,
	amount     BIGINT NOT NULL,
	currency   TEXT NOT NULL,
	status     TEXT NOT NULL,
	checkout   TEXT NOT NULL DEFAULT '',
	charge     TEXT NOT NULL DEFAULT '',
	refunded   BIGINT NOT NULL DEFAULT 0,
	disputed   BIGINT NOT NULL DEFAULT 0,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX payments_user ON payments (user_id, id);
CREATE INDEX payments_charge ON payments (provider, charge);

CREATE TABLE payment_events (
	provider   TEXT NOT NULL,
	event_id   TEXT NOT NULL,
	payment_id BIGINT NOT NULL,
	kind       TEXT NOT NULL,
	quota_delta BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (provider, event_id)
);
