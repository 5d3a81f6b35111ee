-- Files uploaded through /v1/files and the output files of batches: the
-- metadata of each, owned by one user; the bytes live on disk beside the
-- database (the batches dir). expires_at is unix milliseconds, 0 for never.
-- Batches themselves are tasks (ids batch_...): their leases, money and
-- settlement are the task table's.
CREATE TABLE files (
	id         TEXT PRIMARY KEY,
	user_id    BIGINT NOT NULL,
	purpose    TEXT NOT NULL DEFAULT '',
	filename   TEXT NOT NULL DEFAULT '',
	bytes      BIGINT NOT NULL DEFAULT 0,
	lines      BIGINT NOT NULL DEFAULT 0,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX files_user_created ON files (user_id, created_at);
CREATE INDEX files_expires_at ON files (expires_at);
CREATE INDEX tasks_user_created ON tasks (user_id, created_at);
