-- PostgreSQL keeps usage_logs in one partition per day from this step on
-- (store/postgres/migrations/0026_usage_partitions.sql); SQLite has no
-- partitions, and this step keeps the two stores' versions one for one.
SELECT 1;
