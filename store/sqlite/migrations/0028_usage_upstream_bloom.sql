-- PostgreSQL gives the upstream request id BRIN bloom filters at this step
-- (store/postgres/migrations/0028_usage_upstream_bloom.sql); SQLite looks
-- an upstream id up by a scan of the days asked for, and this step keeps
-- the two stores' versions one for one.
SELECT 1;
