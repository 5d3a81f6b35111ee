-- Tasks are followed to the end by the gateway's poller: what the upstream
-- last said (progress, files, error), when to ask again, which gateway
-- instance holds the task for now (a lease, so two instances on one
-- database never poll or settle it twice), and the prices fixed at submit.
-- finished_at is set exactly once, in the transaction that settles the
-- task's money: a task is settled if and only if it is not NULL.
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

-- the statuses the task endpoints report
UPDATE tasks SET status = 'finished' WHERE status = 'succeeded';
UPDATE tasks SET status = 'not_started' WHERE status = 'pending';
UPDATE tasks SET finished_at = updated_at WHERE status IN ('finished', 'failed');

-- the poller's question: unfinished tasks due for a poll
CREATE INDEX tasks_due ON tasks (next_poll_at) WHERE finished_at IS NULL;
