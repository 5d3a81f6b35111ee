-- A credit (a top-up, a redemption, an administrator's, a task's refund, a
-- key's limit raised) is announced on the channel gateway_identity when
-- its transaction commits, as 'c' and the user's id or 'k' and the key's
-- id, so that every instance's quota ledger looks at the balance again at
-- the next request it cannot cover (billing/lease.go) rather than at its
-- next lease renewal. Only rises are announced: settlements lower the
-- balance on every request, and a notification each would flood every
-- instance.
CREATE FUNCTION gateway_notify_user_credit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gateway_identity', 'c' || NEW.id::text);
    RETURN NULL;
END $$;

CREATE FUNCTION gateway_notify_token_credit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gateway_identity', 'k' || NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER users_announce_credit AFTER UPDATE OF quota ON users
    FOR EACH ROW WHEN (NEW.quota > OLD.quota)
    EXECUTE FUNCTION gateway_notify_user_credit();
CREATE TRIGGER tokens_announce_credit AFTER UPDATE OF quota_limit, used_quota ON tokens
    FOR EACH ROW WHEN (NEW.quota_limit > 0 AND NEW.quota_limit - NEW.used_quota > OLD.quota_limit - OLD.used_quota)
    EXECUTE FUNCTION gateway_notify_token_credit();
