-- Tasks are followed to the end by the gateways' pollers (store/sqlite's
-- 0005, without its rewrite of older statuses: see 0002): what the upstream
-- last said, when to ask again, which instance holds the task for now (a
-- lease, taken with FOR UPDATE SKIP LOCKED, so two instances never poll or
-- settle it twice), and the prices fixed at submit. finished_at is set
-- exactly once, in the transaction that settles the task's money.
ALTER TABLE tasks ADD COLUMN progress INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN files TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN error TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN duration INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN price_task BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN price_second BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN cost BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN finished_at BIGINT;
ALTER TABLE tasks ADD COLUMN next_poll_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN polls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;

-- the pollers' question: unfinished tasks due for a poll
CREATE INDEX tasks_due ON tasks (next_poll_at) WHERE finished_at IS NULL;
-- an instance releasing its leases as it stops
CREATE INDEX tasks_lease_owner ON tasks (lease_owner) WHERE lease_owner <> '';
-- PendingTasks: unfinished tasks, least recently updated first
CREATE INDEX tasks_pending ON tasks (updated_at, id) WHERE finished_at IS NULL;
