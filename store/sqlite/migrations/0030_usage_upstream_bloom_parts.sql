-- PostgreSQL splits its upstream request id bloom indexes in 16 parts at this
-- step (store/postgres/migrations/0030_usage_upstream_bloom_parts.sql); SQLite
-- has kept its bloom filters in 16 parts since 0029, and this step keeps the
-- two stores' versions one for one.
SELECT 1;
