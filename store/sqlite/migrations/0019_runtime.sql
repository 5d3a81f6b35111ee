-- Runtime configuration: channels, prices and plans an administrator makes
-- in the console or the admin API (store/runtime.go). config is the item's
-- JSON; secret a channel's vendor keys sealed with the gateway's
-- secrets_key (AES-GCM), never clear text; test the JSON of a channel's
-- last test. Times in unix milliseconds.
CREATE TABLE runtime_config (
	kind       TEXT NOT NULL,
	name       TEXT NOT NULL,
	config     TEXT NOT NULL,
	secret     BLOB,
	key_prefix TEXT NOT NULL DEFAULT '',
	disabled   INTEGER NOT NULL DEFAULT 0,
	test       TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (kind, name)
);
