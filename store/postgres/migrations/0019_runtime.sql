-- Runtime configuration: channels, prices and plans an administrator makes
-- in the console or the admin API (store/runtime.go). config is the item's
-- JSON; secret a channel's vendor keys sealed with the gateway's
-- secrets_key (AES-GCM), never clear text; test the JSON of a channel's
-- last test. Times in unix milliseconds.
CREATE TABLE runtime_config (
	kind       TEXT NOT NULL,
	name       TEXT NOT NULL,
	config     TEXT NOT NULL,
	secret     BYTEA,
	key_prefix TEXT NOT NULL DEFAULT '',
	disabled   BIGINT NOT NULL DEFAULT 0,
	test       TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (kind, name)
);

-- A change to what the gateway serves is announced on gateway_identity as
-- 'r', once per statement, when its transaction commits, so that every
-- instance rebuilds its routing table at once (a test result is no change).
CREATE FUNCTION gateway_notify_runtime() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gateway_identity', 'r');
    RETURN NULL;
END $$;

CREATE TRIGGER runtime_config_announce AFTER INSERT OR DELETE OR UPDATE OF kind, name, config, secret, disabled ON runtime_config
    FOR EACH STATEMENT EXECUTE FUNCTION gateway_notify_runtime();
