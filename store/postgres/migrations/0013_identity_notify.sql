-- Every change to what gateway instances cache about a key or a user (a
-- status, limits, allowed models, an expiry, a role, a password, a key or
-- user deleted) is announced on the channel gateway_identity when its
-- transaction commits, whoever made it (an instance, the CLI, psql), so
-- that every instance drops the cached entry at once (store/postgres's
-- WatchIdentities listens). The payload is 't' and a key's hash, or 'u'
-- and a user's id. Money and counters change on every settlement and are
-- left out: the balance leases follow them, and a notification per
-- request would flood every instance.
CREATE FUNCTION gateway_notify_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('gateway_identity', 't' || OLD.key_hash);
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.key_hash <> OLD.key_hash) THEN
        -- a key an instance has remembered as unknown
        PERFORM pg_notify('gateway_identity', 't' || NEW.key_hash);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION gateway_notify_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gateway_identity', 'u' || OLD.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER tokens_announce_insert AFTER INSERT ON tokens
    FOR EACH ROW EXECUTE FUNCTION gateway_notify_token();
CREATE TRIGGER tokens_announce_delete AFTER DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION gateway_notify_token();
-- the whole row but its spend, so that a column added later is announced too
CREATE TRIGGER tokens_announce_update AFTER UPDATE ON tokens
    FOR EACH ROW WHEN ((to_jsonb(OLD) - 'used_quota') IS DISTINCT FROM (to_jsonb(NEW) - 'used_quota'))
    EXECUTE FUNCTION gateway_notify_token();

CREATE TRIGGER users_announce_delete AFTER DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION gateway_notify_user();
CREATE TRIGGER users_announce_update AFTER UPDATE ON users
    FOR EACH ROW WHEN ((to_jsonb(OLD) - ARRAY['quota', 'used_quota', 'request_count', 'invitation_quota', 'invitation_reward_owed'])
        IS DISTINCT FROM (to_jsonb(NEW) - ARRAY['quota', 'used_quota', 'request_count', 'invitation_quota', 'invitation_reward_owed']))
    EXECUTE FUNCTION gateway_notify_user();
