-- The audit log: every administrator's change (users, keys, codes, channel
-- tests), by whom (a user, or "cli" for the server's command line), to
-- what, and the fields before and after as a JSON object with no secret
-- in it. Times are unix milliseconds.
CREATE TABLE audit_log (
    id          BIGSERIAL PRIMARY KEY,
    created_at  BIGINT NOT NULL,
    actor_id    BIGINT NOT NULL DEFAULT 0, -- 0: not a user (the CLI)
    actor       TEXT   NOT NULL,
    action      TEXT   NOT NULL,
    target      TEXT   NOT NULL DEFAULT '',
    before_json TEXT   NOT NULL DEFAULT '',
    after_json  TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_created_at ON audit_log (created_at);
CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_action ON audit_log (action, id);

-- Redemption codes made together carry the batch's name.
ALTER TABLE redemption_codes ADD COLUMN name TEXT NOT NULL DEFAULT '';
CREATE INDEX redemption_codes_name ON redemption_codes (name, id);

-- The operators' usage log filters by key, channel, status and request id,
-- newest first, paged by (created_at, id).
CREATE INDEX usage_logs_token_id_created_at ON usage_logs (token_id, created_at, id);
CREATE INDEX usage_logs_channel_created_at ON usage_logs (channel, created_at, id);
-- Failed requests (any status but 2xx), a few of all rows: ListUsage writes
-- this exact condition for "error" and for one failed status, so both use it.
CREATE INDEX usage_logs_failed_created_at ON usage_logs (created_at, id) WHERE status < 200 OR status >= 300;
-- The gateway's request ids start with the time, so this index grows at
-- its end. The upstream's ids get none: vendors make them at random, and
-- such an index puts each row of a batch in a page of its own, several
-- times the cost of every usage commit; store.ByRequestID scans for them.
CREATE INDEX usage_logs_request_id ON usage_logs (request_id);
