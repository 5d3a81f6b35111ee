-- SQLite keeps usage rows in one table per day from this step on
-- (store/sqlite/migrations/0027_usage_days.sql); PostgreSQL has had day
-- partitions since 0026, and this step keeps the two stores' versions one
-- for one.
SELECT 1;
